/**
 * Tenant passwords and their SCRAM-SHA-256 verifiers. The server only ever receives the verifier
 * (RFC 5802/7677, PostgreSQL's `SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>`), so
 * the plaintext reaches neither the server nor its logs; the platform never stores it.
 */
import { createHash, createHmac, pbkdf2, randomBytes } from "crypto";
import { promisify } from "util";

const pbkdf2Async = promisify(pbkdf2);

const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
export const PASSWORD_LENGTH = 32; // ~190 bits; needs no URL-encoding in a connection string
export const PASSWORD_PATTERN = /^[A-Za-z0-9]{32}$/;
/** PostgreSQL's default scram_iterations. */
export const SCRAM_ITERATIONS = 4096;

export type RandomBytes = (size: number) => Buffer;

/** Uniform over the alphabet: bytes that would bias the modulo are drawn again. */
export function generatePassword(random: RandomBytes = randomBytes): string {
  const limit = 256 - (256 % ALPHABET.length);
  let out = "";
  while (out.length < PASSWORD_LENGTH) {
    for (const byte of random(PASSWORD_LENGTH)) {
      if (byte >= limit) continue;
      out += ALPHABET[byte % ALPHABET.length];
      if (out.length === PASSWORD_LENGTH) break;
    }
  }
  return out;
}

const hmac = (key: Buffer, text: string) => createHmac("sha256", key).update(text).digest();

/**
 * The verifier PostgreSQL would compute itself. Our passwords are plain ASCII letters and digits,
 * which SASLprep leaves unchanged.
 */
export async function scramVerifier(password: string, salt: Buffer = randomBytes(16), iterations = SCRAM_ITERATIONS): Promise<string> {
  if (!/^[\x21-\x7e]+$/.test(password)) throw new Error("scramVerifier takes printable ASCII passwords only");
  const salted = await pbkdf2Async(password, salt, iterations, 32, "sha256");
  const storedKey = createHash("sha256").update(hmac(salted, "Client Key")).digest();
  const serverKey = hmac(salted, "Server Key");
  return `SCRAM-SHA-256$${iterations}:${salt.toString("base64")}$${storedKey.toString("base64")}:${serverKey.toString("base64")}`;
}

/** A verifier can be inlined as a SQL literal: its alphabet has no quote or backslash. */
export const VERIFIER_PATTERN = /^SCRAM-SHA-256\$\d+:[A-Za-z0-9+/=]+\$[A-Za-z0-9+/=]+:[A-Za-z0-9+/=]+$/;
