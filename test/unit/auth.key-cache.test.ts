/**
 * The gateway's cache of auth's answers for API keys (caller-resolver.ts), on a fake clock and fake
 * lookups: what is cached, for how long, what ends it early, and what is never cached.
 */
import { API_KEY_CACHE_ENTRIES, API_KEY_CACHE_MS, CallerResolver } from "../../services/api-gateway/caller-resolver";
import { readCredentials } from "../../services/api-gateway/credentials";
import { hashApiKey } from "../../services/auth/api-keys";
import { parseGatewaySettings } from "../../services/api-gateway/settings";
import type { Caller } from "../../lib/identity";

const ID = "4b6f1c2e-0000-4000-8000-000000000001";
const OTHER = "4b6f1c2e-0000-4000-8000-000000000002";
const keyOf = (c: string) => "ci_" + c.repeat(32);
const KEY = keyOf("a");
const NEW_KEY = keyOf("b");
const INVALID = { error: "API key is invalid or was revoked" };

/** A fake auth: `keys` maps a key's SHA-256 to its caller; every lookup is recorded. */
function setUp(opts: { cacheMs?: number; keys?: Record<string, Caller> } = {}) {
  const clock = { now: 1_000_000 };
  const keys = new Map<string, Caller>(Object.entries(opts.keys ?? { [hashApiKey(KEY)]: { clientId: ID, role: "client", via: "apiKey" } }));
  const asked: string[] = [];
  let gate: Promise<void> | undefined;
  const resolver = new CallerResolver<null>(
    {
      apiKey: async (_via, hash) => {
        asked.push(hash);
        const answer = keys.get(hash) ?? null; // read when asked, as auth's query would
        const wait = gate;
        gate = undefined;
        if (wait) await wait;
        return answer ? { ...answer } : null;
      },
      accountRole: async () => "client",
    },
    "auth-key-cache-test-secret",
    () => clock.now,
    opts.cacheMs,
  );
  const resolve = (key: string) => resolver.resolve(readCredentials({ "x-api-key": key }), null);
  /** The next lookup waits until `release()`. */
  const hold = () => {
    let release!: () => void;
    gate = new Promise<void>((resolve) => (release = resolve));
    return () => release();
  };
  return { clock, keys, asked, resolver, resolve, hold };
}

const rotate = (keys: Map<string, Caller>, from: string, to: string) => {
  const caller = keys.get(hashApiKey(from))!;
  keys.delete(hashApiKey(from));
  keys.set(hashApiKey(to), caller);
};

describe("auth - the gateway's API key cache", () => {
  const cases: Array<[string, number, number]> = [
    // name, ms after the first answer, lookups in all
    ["a second request at once is a hit", 0, 1],
    ["a hit just before 1 s", API_KEY_CACHE_MS - 1, 1],
    ["asked again at 1 s", API_KEY_CACHE_MS, 2],
    ["asked again after 1 s", API_KEY_CACHE_MS + 500, 2],
  ];
  it.each(cases)("auth key cache - %s", async (_name, after, lookups) => {
    const { clock, asked, resolve } = setUp();
    expect(await resolve(KEY)).toEqual({ caller: { clientId: ID, role: "client", via: "apiKey" } });
    clock.now += after;
    expect(await resolve(KEY)).toEqual({ caller: { clientId: ID, role: "client", via: "apiKey" } });
    expect(asked).toHaveLength(lookups);
  });

  it("auth key cache - the cache is keyed by the key's SHA-256, and only the SHA-256 is asked", async () => {
    const { asked, resolve } = setUp();
    await resolve(KEY);
    await resolve(KEY);
    expect(asked).toEqual([hashApiKey(KEY)]);
  });

  it("auth key cache - a rotation is seen once the answer is 1 s old (no event heard)", async () => {
    const { clock, keys, resolve } = setUp();
    expect(await resolve(KEY)).toHaveProperty("caller");
    rotate(keys, KEY, NEW_KEY);
    clock.now += API_KEY_CACHE_MS - 1;
    expect(await resolve(KEY)).toHaveProperty("caller"); // the bound, not more: still within 1 s
    clock.now += 1;
    expect(await resolve(KEY)).toEqual(INVALID);
    expect(await resolve(NEW_KEY)).toEqual({ caller: { clientId: ID, role: "client", via: "apiKey" } });
  });

  it("auth key cache - the 1 s counts from when auth was asked, not from when it answered", async () => {
    const { clock, keys, resolve, hold } = setUp();
    const release = hold();
    const first = resolve(KEY);
    clock.now += 400; // a slow answer
    release();
    expect(await first).toHaveProperty("caller");
    rotate(keys, KEY, NEW_KEY);
    clock.now += API_KEY_CACHE_MS - 400;
    expect(await resolve(KEY)).toEqual(INVALID);
  });

  it("auth key cache - the replacement event ends the account's cached answers at once, not another account's", async () => {
    const other = keyOf("c");
    const { clock, keys, asked, resolver, resolve } = setUp({
      keys: { [hashApiKey(KEY)]: { clientId: ID, role: "client", via: "apiKey" }, [hashApiKey(other)]: { clientId: OTHER, role: "client", via: "apiKey" } },
    });
    await resolve(KEY);
    await resolve(other);
    rotate(keys, KEY, NEW_KEY);
    clock.now += 1;
    resolver.keyReplaced(ID);
    expect(await resolve(KEY)).toEqual(INVALID);
    expect(await resolve(other)).toHaveProperty("caller");
    expect(asked).toEqual([hashApiKey(KEY), hashApiKey(other), hashApiKey(KEY)]);
    clock.now += 1; // an answer asked in the event's own millisecond is not trusted: it may predate the event
    expect(await resolve(NEW_KEY)).toHaveProperty("caller"); // the new key, asked after the event, is cached again
    expect(await resolve(NEW_KEY)).toHaveProperty("caller");
    expect(asked).toHaveLength(4);
  });

  it("auth key cache - an answer asked before the event but arriving after it is not trusted", async () => {
    const { keys, resolver, resolve, hold, asked } = setUp();
    const release = hold();
    const inFlight = resolve(KEY); // auth read the old key before the rotation
    rotate(keys, KEY, NEW_KEY);
    resolver.keyReplaced(ID);
    release();
    expect(await inFlight).toHaveProperty("caller"); // the request that was in flight is answered as it was asked
    expect(await resolve(KEY)).toEqual(INVALID);
    expect(asked).toHaveLength(2);
  });

  it("auth key cache - a refused key is not cached: a key made just after works at once", async () => {
    const { keys, asked, resolve } = setUp({ keys: {} });
    expect(await resolve(KEY)).toEqual(INVALID);
    keys.set(hashApiKey(KEY), { clientId: ID, role: "client", via: "apiKey" });
    expect(await resolve(KEY)).toHaveProperty("caller");
    expect(await resolve(keyOf("z"))).toEqual(INVALID);
    expect(await resolve(keyOf("z"))).toEqual(INVALID);
    expect(asked).toEqual([hashApiKey(KEY), hashApiKey(KEY), hashApiKey(keyOf("z")), hashApiKey(keyOf("z"))]);
  });

  it("auth key cache - a hit carries the role auth gave, in a copy the request cannot change for others", async () => {
    const { asked, resolve } = setUp({ keys: { [hashApiKey(KEY)]: { clientId: ID, role: "admin", via: "apiKey" } } });
    const first = await resolve(KEY);
    if (!("caller" in first)) throw new Error("expected a caller");
    first.caller.role = "tampered";
    expect(await resolve(KEY)).toEqual({ caller: { clientId: ID, role: "admin", via: "apiKey" } });
    expect(asked).toHaveLength(1);
  });

  it("auth key cache - a role change is seen once the answer is 1 s old", async () => {
    const { clock, keys, resolve } = setUp();
    await resolve(KEY);
    keys.set(hashApiKey(KEY), { clientId: ID, role: "admin", via: "apiKey" });
    clock.now += API_KEY_CACHE_MS;
    expect(await resolve(KEY)).toEqual({ caller: { clientId: ID, role: "admin", via: "apiKey" } });
  });

  it("auth key cache - an answer is not trusted after the clock steps back", async () => {
    const { clock, asked, resolve } = setUp();
    await resolve(KEY);
    clock.now -= 10_000;
    await resolve(KEY);
    expect(asked).toHaveLength(2);
  });

  it("auth key cache - 0 ms asks auth on every request", async () => {
    const { asked, resolve } = setUp({ cacheMs: 0 });
    for (let i = 0; i < 3; i++) expect(await resolve(KEY)).toHaveProperty("caller");
    expect(asked).toHaveLength(3);
  });

  it("auth key cache - entries are bounded: the least recently used key is asked again", async () => {
    const many = Array.from({ length: API_KEY_CACHE_ENTRIES + 1 }, (_, i) => "ci_" + i.toString(36).padStart(32, "0"));
    const keys = Object.fromEntries(many.map((k) => [hashApiKey(k), { clientId: ID, role: "client", via: "apiKey" } as Caller]));
    const { asked, resolve } = setUp({ keys });
    for (const k of many) await resolve(k);
    expect(asked).toHaveLength(many.length);
    await resolve(many[many.length - 1]); // still held
    expect(asked).toHaveLength(many.length);
    await resolve(many[0]); // forgotten
    expect(asked).toHaveLength(many.length + 1);
  });
});

describe("auth - GATEWAY_API_KEY_CACHE_MS", () => {
  const cases: Array<[string, string | undefined, number | string]> = [
    ["unset is 1 s", undefined, 1000],
    ["0 turns the cache off", "0", 0],
    ["below 1 s is allowed", "250", 250],
    ["above 1 s is refused (the revocation rule)", "1001", "GATEWAY_API_KEY_CACHE_MS must be an integer from 0 to 1000"],
    ["negative is refused", "-1", "GATEWAY_API_KEY_CACHE_MS must be an integer of at least 0"],
  ];
  it.each(cases)("auth key cache setting - %s", (_name, raw, expected) => {
    const parse = () => parseGatewaySettings({ NODE_ENV: "test", GATEWAY_API_KEY_CACHE_MS: raw }).apiKeyCacheMs;
    if (typeof expected === "number") expect(parse()).toBe(expected);
    else expect(parse).toThrow(expected);
  });
});
