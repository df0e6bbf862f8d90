/**
 * The auth service on ServiceBrokers against the real PostgreSQL and Redis: two replicas share
 * one database, one Redis rate limit, and see a rotated key at once; migrations are safe when
 * replicas start together.
 */
import { ServiceBroker } from "moleculer";
import Redis from "ioredis";
import { migrate, ensureDatabase, newPool } from "../../lib/db";
import { migrations } from "../../services/auth/migrations";
import { dropDatabase, REDIS_URL, startTestPlatform, TestPlatform, testDatabaseUrl, uniqueName } from "../support/platform";
import type { Caller } from "../../lib/identity";
import { signedCallerMeta } from "../../lib/caller-keys";
import { hashApiKey } from "../../services/auth/api-keys";

describe("auth - service replicas over NATS with Redis", () => {
  let a: TestPlatform;
  let b: TestPlatform;
  const env = { REDIS_URL, AUTH_RATE_LIMIT_PER_IP: "5", AUTH_RATE_LIMIT_PER_EMAIL: "2", AUTH_RATE_WINDOW_S: "60" };

  beforeAll(async () => {
    a = await startTestPlatform({ services: ["auth"], env, transporter: "nats://127.0.0.1:4222" });
    b = await startTestPlatform({
      services: ["auth"],
      env,
      transporter: "nats://127.0.0.1:4222",
      namespace: a.namespace,
      databaseUrl: a.databaseUrl,
      dropDatabase: false,
    });
    await a.broker.waitForServices(["auth"], 10_000);
  });
  afterAll(async () => {
    await b?.stop();
    await a?.stop();
    const redis = new Redis(REDIS_URL);
    const keys = await redis.keys(`${a.namespace}:*`);
    if (keys.length) await redis.del(...keys);
    await redis.quit();
  });

  const callOn = (broker: ServiceBroker, action: string, params: object, meta: object = {}) =>
    broker.call(action, params, { meta, nodeID: broker.nodeID }) as Promise<any>;

  it("auth - a key rotated on one replica is refused at once by the other", async () => {
    const reg = await callOn(
      a.broker,
      "auth.register",
      { email: `${uniqueName("r")}@example.com`, name: "R", password: "password-123" },
      { clientIp: "10.0.0.1" },
    );
    const caller = signedCallerMeta({ clientId: reg.client.id, role: "client", via: "jwt" });
    const resolve = (broker: ServiceBroker, key: string) => callOn(broker, "auth.resolveApiKey", { keyHash: hashApiKey(key) });
    const first = (await callOn(a.broker, "auth.createApiKey", {}, caller)).apiKey;
    expect(await resolve(b.broker, first)).toEqual({ clientId: reg.client.id, role: "client", via: "apiKey" });
    const second = (await callOn(b.broker, "auth.createApiKey", {}, caller)).apiKey;
    expect(await resolve(a.broker, first)).toBeNull();
    expect(await resolve(a.broker, second)).not.toBeNull();
  });

  it("auth - the per-address limit is shared by the replicas through Redis", async () => {
    const meta = { clientIp: uniqueName("ip") };
    const attempt = (broker: ServiceBroker) =>
      callOn(broker, "auth.login", { email: `${uniqueName("x")}@example.com`, password: "whatever-1" }, meta).then(
        () => 200,
        (err) => err.code as number,
      );
    const codes: number[] = [];
    for (let i = 0; i < 6; i++) codes.push(await attempt(i % 2 ? b.broker : a.broker));
    expect(codes.slice(0, 5)).toEqual([401, 401, 401, 401, 401]);
    expect(codes[5]).toBe(429);
  });

  it("auth - login failures per (e-mail, address) are shared through Redis and block only that address", async () => {
    const address = `${uniqueName("owner")}@example.com`;
    await callOn(a.broker, "auth.register", { email: address, name: "O", password: "password-123" }, { clientIp: uniqueName("ip") });
    const attacker = { clientIp: uniqueName("attacker") };
    const login = (broker: ServiceBroker, password: string, meta: object) =>
      callOn(broker, "auth.login", { email: address, password }, meta).then(
        () => 200,
        (err) => err.code as number,
      );
    expect([await login(a.broker, "wrong-1", attacker), await login(b.broker, "wrong-2", attacker)]).toEqual([401, 401]);
    expect(await login(a.broker, "password-123", attacker)).toBe(429); // blocked on the other replica too
    expect(await login(b.broker, "password-123", { clientIp: uniqueName("owner-ip") })).toBe(200);
  });

  it("auth - actions requiring a caller refuse calls without one", async () => {
    const viaKey: Caller = { clientId: "4b6f1c2e-0000-4000-8000-000000000001", role: "client", via: "apiKey" };
    await expect(callOn(a.broker, "auth.me", {})).rejects.toMatchObject({ code: 401, type: "UNAUTHORIZED" });
    await expect(callOn(a.broker, "auth.createApiKey", {}, signedCallerMeta(viaKey))).rejects.toMatchObject({ code: 403 });
    // a caller in meta without the gateway's signed token is no caller at all
    await expect(callOn(a.broker, "auth.me", {}, { caller: { ...viaKey, via: "jwt" } })).rejects.toMatchObject({ code: 401 });
  });

  it("auth - accounts resolve by id for the gateway; a malformed id is a validation error, not a 500", async () => {
    const reg = await callOn(
      a.broker,
      "auth.register",
      { email: `${uniqueName("acc")}@example.com`, name: "A", password: "password-123" },
      { clientIp: "10.0.0.2" },
    );
    expect(await callOn(b.broker, "auth.resolveAccount", { id: reg.client.id })).toEqual({ id: reg.client.id, role: "client" });
    expect(await callOn(b.broker, "auth.resolveAccount", { id: "4b6f1c2e-0000-4000-8000-00000000dead" })).toBeNull();
    await expect(callOn(b.broker, "auth.resolveAccount", { id: "nope" })).rejects.toMatchObject({ code: 422 });
  });
});

describe("platform - migrations", () => {
  it("platform - replicas starting at once create the database and apply each migration once", async () => {
    const url = testDatabaseUrl();
    try {
      await Promise.all([ensureDatabase(url), ensureDatabase(url), ensureDatabase(url)]);
      const pools = [1, 2, 3].map(() => newPool({ connectionString: url }));
      const applied = await Promise.all(pools.map((p) => migrate(p, "auth", migrations)));
      const versions = migrations.map((m) => m.version);
      expect(applied.flat().sort()).toEqual(versions);
      const rows = (await pools[0].query("SELECT version FROM auth.schema_migrations ORDER BY version")).rows;
      expect(rows).toEqual(versions.map((version) => ({ version })));
      await Promise.all(pools.map((p) => p.end()));
    } finally {
      await dropDatabase(url);
    }
  });
});
