/** The auth service's settings (README "Configuration"), parsed when it is created. */
import { parseJwtSecret } from "../../lib/jwt";
import { Env, int, intAtLeast, list } from "../../lib/settings";
import { emailProblem, normalizeEmail } from "./email";

export type AuthSettings = {
  /** Signs access tokens (required in production). */
  jwtSecret: string;
  /** scrypt cost (N = 2^17 is OWASP's recommendation with r=8, p=1). */
  scryptLogN: number;
  /** Password hashes run at once per process (each holds 128 × 2^scryptLogN × 8 bytes), and how many more may wait. */
  hashConcurrency: number;
  hashQueue: number;
  /** Register/login attempts allowed per window, per client address and per e-mail. */
  rateLimitPerIp: number;
  rateLimitPerEmail: number;
  rateWindowS: number;
  /** ADMIN_EMAILS, normalised (email.ts): these accounts get role `admin` at register and login; any other gets `client`. */
  adminEmails: ReadonlySet<string>;
};

export const parseAuthSettings = (env: Env): AuthSettings => ({
  jwtSecret: parseJwtSecret(env),
  scryptLogN: int(env, "SCRYPT_LOG_N", 17),
  hashConcurrency: intAtLeast(env, "AUTH_HASH_CONCURRENCY", 2, 1),
  hashQueue: intAtLeast(env, "AUTH_HASH_QUEUE", 16, 0),
  rateLimitPerIp: int(env, "AUTH_RATE_LIMIT_PER_IP", 60),
  rateLimitPerEmail: int(env, "AUTH_RATE_LIMIT_PER_EMAIL", 10),
  rateWindowS: int(env, "AUTH_RATE_WINDOW_S", 60),
  adminEmails: new Set(list(env, "ADMIN_EMAILS").map(adminEmail)),
});

function adminEmail(raw: string): string {
  const problem = emailProblem(raw);
  if (problem) throw new Error(`ADMIN_EMAILS: ${problem}: ${JSON.stringify(raw)}`);
  return normalizeEmail(raw);
}
