/**
 * Credentials the platform issues: API keys (`ci_…`, one per account) and restricted tokens
 * (`cit_…`, tokens.ts), each a prefix + 32 lowercase letters/digits drawn without bias, stored only
 * as SHA-256.
 */
import { hash, randomInt } from "crypto";

const ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789";
export const API_KEY_PATTERN = /^ci_[a-z0-9]{32}$/;
export const RESTRICTED_TOKEN_PATTERN = /^cit_[a-z0-9]{32}$/;

function generateSecret(prefix: string): string {
  let body = "";
  for (let i = 0; i < 32; i++) body += ALPHABET[randomInt(ALPHABET.length)];
  return `${prefix}${body}`;
}

export const generateApiKey = (): string => generateSecret("ci_");
export const generateRestrictedToken = (): string => generateSecret("cit_");

/**
 * The stored form of a key or a token: SHA-256, lowercase hex. One-shot `crypto.hash` (the gateway
 * hashes the key of every request it serves; a Hash object per call cost several times more).
 */
export function hashApiKey(key: string): string {
  return hash("sha256", key, "hex");
}

/** What the gateway sends auth for a key or a token: its SHA-256, lowercase hex. */
export const KEY_HASH_PATTERN = /^[0-9a-f]{64}$/;
