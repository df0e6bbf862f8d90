/** API keys: `ci_` + 32 lowercase letters/digits, drawn without bias; stored only as SHA-256. */
import { createHash, randomInt } from "crypto";

const ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789";
export const API_KEY_PATTERN = /^ci_[a-z0-9]{32}$/;

export function generateApiKey(): string {
  let body = "";
  for (let i = 0; i < 32; i++) body += ALPHABET[randomInt(ALPHABET.length)];
  return `ci_${body}`;
}

export function hashApiKey(key: string): string {
  return createHash("sha256").update(key).digest("hex");
}

/** What the gateway sends auth for a key: its SHA-256, lowercase hex. */
export const KEY_HASH_PATTERN = /^[0-9a-f]{64}$/;
