/**
 * Password hashing with scrypt (memory-hard). Default cost N = 2^17, r = 8, p = 1: OWASP's
 * recommendation. The parameters are stored with each hash so the cost can be raised later.
 */
import { randomBytes, scrypt, ScryptOptions, timingSafeEqual } from "crypto";

const KEY_LENGTH = 32;

function derive(password: string, salt: Buffer, logN: number, r: number, p: number): Promise<Buffer> {
  const N = 2 ** logN;
  const options: ScryptOptions = { N, r, p, maxmem: 256 * N * r + 32 * 1024 * 1024 };
  return new Promise((resolve, reject) => scrypt(password, salt, KEY_LENGTH, options, (err, key) => (err ? reject(err) : resolve(key))));
}

export async function hashPassword(password: string, logN: number): Promise<string> {
  const salt = randomBytes(16);
  const key = await derive(password, salt, logN, 8, 1);
  return ["scrypt", logN, 8, 1, salt.toString("base64"), key.toString("base64")].join("$");
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const parts = stored.split("$");
  if (parts.length !== 6 || parts[0] !== "scrypt") return false;
  const [, logN, r, p, salt, expected] = parts;
  const key = await derive(password, Buffer.from(salt, "base64"), Number(logN), Number(r), Number(p));
  const want = Buffer.from(expected, "base64");
  return want.length === key.length && timingSafeEqual(key, want);
}
