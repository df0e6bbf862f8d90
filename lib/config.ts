/**
 * Every environment variable the platform reads, in one place (see README "Configuration").
 * Read lazily so tests can set process.env before a broker starts.
 */
const DEV_JWT_SECRET = "ci-platform-development-secret-change-me";

function int(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === "") return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value)) throw new Error(`${name} must be an integer, got "${raw}"`);
  return value;
}

export const isProduction = (): boolean => process.env.NODE_ENV === "production";

export const config = {
  port: () => int("PORT", 3000),
  transporter: () => process.env.TRANSPORTER || undefined,
  namespace: () => process.env.NAMESPACE || "",
  services: () =>
    (process.env.SERVICES || "")
      .split(",")
      .map((s) => s.trim())
      .filter(Boolean),
  databaseUrl: () => process.env.DATABASE_URL || "postgresql://postgres@127.0.0.1:5432/ci_platform",
  redisUrl: () => process.env.REDIS_URL || undefined,
  jwtSecret: (): string => {
    const secret = process.env.JWT_SECRET;
    if (secret) return secret;
    if (isProduction()) throw new Error("JWT_SECRET is required when NODE_ENV=production");
    return DEV_JWT_SECRET;
  },
  /** scrypt cost (N = 2^17 is OWASP's recommendation with r=8, p=1). */
  scryptLogN: () => int("SCRYPT_LOG_N", 17),
  /** Register/login attempts allowed per window, per client address and per e-mail. */
  authRateLimitPerIp: () => int("AUTH_RATE_LIMIT_PER_IP", 60),
  authRateLimitPerEmail: () => int("AUTH_RATE_LIMIT_PER_EMAIL", 10),
  authRateWindowS: () => int("AUTH_RATE_WINDOW_S", 60),
  /** Trust X-Forwarded-For for the client address (behind an ingress). */
  trustProxy: () => process.env.TRUST_PROXY === "true",
  logLevel: () => process.env.LOG_LEVEL || "info",
  logFormat: () => process.env.LOG_FORMAT || (isProduction() ? "json" : "short"),
};
