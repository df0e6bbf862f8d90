/**
 * Signed caller tokens: the caller the gateway resolved (JWT or API key), as
 * `<base64url JSON {clientId, role, via, token?, exp}>.<base64url Ed25519 signature>`, valid about a
 * minute; `token` is a restricted token's limits (lib/identity.ts TokenLimits), which services check.
 * Only the gateway holds the private key; every service checks with the public key, so a bus
 * participant without it cannot act for an account. Both sides cache: the gateway re-signs a
 * caller's token only after half its lifetime, services verify a token string once until exp.
 */
import { createPrivateKey, createPublicKey, generateKeyPairSync, KeyObject, sign, verify } from "crypto";
import type { Caller, TokenLimits } from "./identity";
import { TOKEN_SCOPES } from "./scopes";
import { LruCache } from "./lru-cache";
import { isUuid } from "./uuid";

export const CALLER_TOKEN_TTL_S = 60;
const CACHE_ENTRIES = 10_000;
/** Room for a restricted token's limits (at most 32 models of 128 characters and 16 databases). */
const MAX_TOKEN_LENGTH = 8192;

// DER headers that turn a raw 32-byte Ed25519 seed / public key into PKCS#8 / SPKI (RFC 8410).
const PKCS8_ED25519 = Buffer.from("302e020100300506032b657004220420", "hex");
const SPKI_ED25519 = Buffer.from("302a300506032b6570032100", "hex");

export type Clock = () => number;
export type CallerCheck = { caller: Caller } | { error: string };

function rawKey(text: string, what: string): Buffer {
  const raw = Buffer.from(text, "base64");
  if (raw.length !== 32) throw new Error(`${what} must be base64 of 32 bytes or a PEM Ed25519 key`);
  return raw;
}

function ensureEd25519(key: KeyObject, what: string): KeyObject {
  if (key.asymmetricKeyType !== "ed25519") throw new Error(`${what} must be an Ed25519 key, got ${key.asymmetricKeyType}`);
  return key;
}

/** A private key from base64 of a 32-byte seed, or from PEM (PKCS#8). */
export function privateKeyFrom(text: string, what = "CALLER_SIGNING_KEY"): KeyObject {
  const key = text.includes("-----BEGIN")
    ? createPrivateKey(text)
    : createPrivateKey({ key: Buffer.concat([PKCS8_ED25519, rawKey(text, what)]), format: "der", type: "pkcs8" });
  return ensureEd25519(key, what);
}

/** A public key from base64 of its 32 raw bytes, or from PEM (SPKI). */
export function publicKeyFrom(text: string, what = "CALLER_VERIFY_KEY"): KeyObject {
  const key = text.includes("-----BEGIN")
    ? createPublicKey(text)
    : createPublicKey({ key: Buffer.concat([SPKI_ED25519, rawKey(text, what)]), format: "der", type: "spki" });
  return ensureEd25519(key, what);
}

/** Base64 of a public key's 32 raw bytes (what CALLER_VERIFY_KEY takes). */
export function rawPublicKeyOf(key: KeyObject): string {
  const publicKey = key.type === "public" ? key : createPublicKey(key);
  return publicKey.export({ format: "der", type: "spki" }).subarray(SPKI_ED25519.length).toString("base64");
}

/** A fresh pair as the variables take it: CALLER_SIGNING_KEY (seed) and CALLER_VERIFY_KEY (public key), base64. */
export function generateCallerKeyPair(): { signingKey: string; verifyKey: string } {
  const { privateKey } = generateKeyPairSync("ed25519");
  const seed = privateKey.export({ format: "der", type: "pkcs8" }).subarray(PKCS8_ED25519.length);
  return { signingKey: seed.toString("base64"), verifyKey: rawPublicKeyOf(privateKey) };
}

export function signCallerToken(caller: Caller, expS: number, key: KeyObject): string {
  const { clientId, role, via, token } = caller;
  const payload = Buffer.from(JSON.stringify(token ? { clientId, role, via, token, exp: expS } : { clientId, role, via, exp: expS }));
  return `${payload.toString("base64url")}.${sign(null, payload, key).toString("base64url")}`;
}

type Claims = Caller & { exp: number };

const stringsOrNull = (v: unknown): v is string[] | null => v === null || (Array.isArray(v) && v.every((s) => typeof s === "string"));

function limitsOf(json: unknown): TokenLimits | undefined {
  const t = json as Partial<TokenLimits> | null;
  if (!t || typeof t !== "object" || typeof t.id !== "string" || !isUuid(t.id)) return undefined;
  if (!Array.isArray(t.scopes) || !t.scopes.every((s) => (TOKEN_SCOPES as readonly unknown[]).includes(s))) return undefined;
  if (!stringsOrNull(t.models) || !stringsOrNull(t.databases)) return undefined;
  if (t.jobId !== null && (typeof t.jobId !== "string" || !isUuid(t.jobId))) return undefined;
  // Shared by every request with this caller token (the verifier's cache): frozen through, lists included.
  const frozen = <T>(list: T[] | null) => (list ? (Object.freeze([...list]) as T[]) : null);
  return Object.freeze({ id: t.id, scopes: frozen(t.scopes)!, models: frozen(t.models), databases: frozen(t.databases), jobId: t.jobId });
}

function claimsOf(json: unknown): Claims | undefined {
  const c = json as Partial<Claims> | null;
  if (!c || typeof c !== "object") return undefined;
  if (typeof c.clientId !== "string" || !isUuid(c.clientId)) return undefined;
  if (typeof c.role !== "string" || c.role.length === 0 || c.role.length > 32) return undefined;
  if (c.via !== "jwt" && c.via !== "apiKey" && c.via !== "token") return undefined;
  if (typeof c.exp !== "number" || !Number.isInteger(c.exp)) return undefined;
  // A token caller carries its limits, and only a token caller: no limits must never read as "none".
  const token = c.via === "token" ? limitsOf(c.token) : undefined;
  if ((c.via === "token") !== (token !== undefined)) return undefined;
  return token ? { clientId: c.clientId, role: c.role, via: c.via, token, exp: c.exp } : { clientId: c.clientId, role: c.role, via: c.via, exp: c.exp };
}

/** Checks signature and shape only; expiry is the caller's business (see CallerTokenVerifier). */
export function readCallerToken(token: string, key: KeyObject): Claims | undefined {
  if (token.length > MAX_TOKEN_LENGTH) return undefined;
  const dot = token.indexOf(".");
  if (dot <= 0) return undefined;
  const payload = Buffer.from(token.slice(0, dot), "base64url");
  const signature = Buffer.from(token.slice(dot + 1), "base64url");
  if (signature.length !== 64 || !verify(null, payload, key, signature)) return undefined;
  try {
    return claimsOf(JSON.parse(payload.toString("utf8")));
  } catch {
    return undefined;
  }
}

/** The gateway's side: one token per caller, re-signed once half its lifetime has passed. */
export class CallerTokenSigner {
  private readonly cache = new LruCache<string, { token: string; renewAtMs: number }>(CACHE_ENTRIES);

  constructor(
    private readonly key: KeyObject,
    private readonly now: Clock = Date.now,
    private readonly ttlS = CALLER_TOKEN_TTL_S,
  ) {}

  tokenFor(caller: Caller): string {
    const now = this.now();
    // A token's limits never change: its id names them.
    const id = `${caller.clientId}|${caller.role}|${caller.via}|${caller.token?.id ?? ""}`;
    const cached = this.cache.get(id);
    if (cached && cached.renewAtMs > now) return cached.token;
    const expS = Math.floor(now / 1000) + this.ttlS;
    const token = signCallerToken(caller, expS, this.key);
    this.cache.set(id, { token, renewAtMs: now + (this.ttlS * 1000) / 2 });
    return token;
  }
}

/** Every service's side: a token string is verified once, then served from a bounded cache until exp. */
export class CallerTokenVerifier {
  private readonly cache = new LruCache<string, { caller: Caller; expMs: number }>(CACHE_ENTRIES);

  constructor(
    private readonly key: KeyObject,
    private readonly now: Clock = Date.now,
  ) {}

  check(token: unknown): CallerCheck {
    if (typeof token !== "string") return { error: "Caller token is missing" };
    const now = this.now();
    const cached = this.cache.get(token);
    if (cached) {
      if (cached.expMs > now) return { caller: cached.caller };
      this.cache.delete(token);
      return { error: "Caller token expired" };
    }
    const claims = readCallerToken(token, this.key);
    if (!claims) return { error: "Caller token is invalid" };
    const expMs = claims.exp * 1000;
    if (expMs <= now) return { error: "Caller token expired" };
    // Shared by every request with this token: frozen, so no handler can change it for the others.
    const { exp: _exp, ...fields } = claims;
    const caller: Caller = Object.freeze(fields);
    this.cache.set(token, { caller, expMs });
    return { caller };
  }
}
