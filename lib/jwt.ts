/**
 * Access tokens: HS256 only (algorithm pinned on verify), 24 h, with a jti. A token is accepted
 * only with an `exp` at most 24 h after its `iat`, an `iat` not in the future (60 s of clock
 * skew) and a UUID `sub`; that the account still exists is the gateway's check (caller-resolver).
 */
import { createSecretKey, KeyObject, randomUUID } from "crypto";
import jwt from "jsonwebtoken";
import { type Env, isProductionEnv } from "./settings";
import { isUuid } from "./uuid";

const DEV_JWT_SECRET = "ci-platform-development-secret-change-me";

/** JWT_SECRET (auth signs, the gateway verifies): required when NODE_ENV=production, else a development secret. */
export function parseJwtSecret(env: Env): string {
  const secret = env.JWT_SECRET;
  if (secret) return secret;
  if (isProductionEnv(env)) throw new Error("JWT_SECRET is required when NODE_ENV=production");
  return DEV_JWT_SECRET;
}

export const ACCESS_TOKEN_TTL_S = 24 * 60 * 60;
const CLOCK_SKEW_S = 60;
const ALGORITHM = "HS256";

// jsonwebtoken imports a string secret on every call (~0.3 ms); a KeyObject made once is ~50x cheaper.
const keys = new Map<string, KeyObject>();
function keyOf(secret: string): KeyObject {
  let key = keys.get(secret);
  if (!key) {
    key = createSecretKey(Buffer.from(secret, "utf8"));
    keys.set(secret, key);
  }
  return key;
}

export type AccessClaims = { sub: string; role: string; jti: string; iat: number; exp: number };

export function signAccessToken(clientId: string, role: string, secret: string): string {
  return jwt.sign({ role }, keyOf(secret), {
    algorithm: ALGORITHM,
    subject: clientId,
    jwtid: randomUUID(),
    expiresIn: ACCESS_TOKEN_TTL_S,
  });
}

/** Why signed claims are still refused, or undefined when they are fine. */
export function claimsProblem(claims: Partial<AccessClaims>, nowS: number): string | undefined {
  if (typeof claims.sub !== "string" || typeof claims.role !== "string" || typeof claims.jti !== "string") return "Access token is malformed";
  if (!isUuid(claims.sub)) return "Access token is malformed";
  if (typeof claims.exp !== "number" || typeof claims.iat !== "number") return "Access token must carry exp and iat";
  if (claims.iat > nowS + CLOCK_SKEW_S) return "Access token is issued in the future";
  if (claims.exp - claims.iat > ACCESS_TOKEN_TTL_S) return "Access token lifetime exceeds 24 hours";
  return undefined;
}

/** Returns the claims, or a reason the token is refused. */
export function verifyAccessToken(token: string, secret: string, nowMs = Date.now()): AccessClaims | { error: string } {
  try {
    const claims = jwt.verify(token, keyOf(secret), { algorithms: [ALGORITHM], clockTimestamp: Math.floor(nowMs / 1000) }) as Partial<AccessClaims>;
    const problem = claimsProblem(claims, Math.floor(nowMs / 1000));
    return problem ? { error: problem } : (claims as AccessClaims);
  } catch (err) {
    return { error: (err as Error).name === "TokenExpiredError" ? "Access token expired" : "Access token is invalid" };
  }
}
