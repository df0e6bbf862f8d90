/**
 * The auth service on ServiceBrokers against the real PostgreSQL and Redis: two replicas share
 * one database, one Redis rate limit, and see a rotated key at once; migrations are safe when
 * replicas start together.
 */
import { ServiceBroker } from "moleculer";
import { Pool } from "pg";
import Redis from "ioredis";
import { migrate, ensureDatabase } from "../../lib/db";
import { migrations } from "../../services/auth/migrations";
import { dropDatabase, REDIS_URL, startTestPlatform, TestPlatform, testDatabaseUrl, uniqueName } from "../support/platform";
import type { Caller } from "../../lib/identity";

describe("auth - service replicas over NATS with Redis", () => {
  let a: TestPlatform;
  let b: TestPlatform;
  const env = { REDIS_URL, AUTH_RATE_LIMIT_PER_IP: "5", AUTH_RATE_WINDOW_S: "60" };

  beforeAll(async () => {
    a = await startTestPlatform({ services: ["auth"], env, transporter: "nats://127.0.0.1:4222" });
    b = await startTestPlatform({ services: ["auth"], env, transporter: "nats://127.0.0.1:4222", namespace: a.namespace, databaseUrl: a.databaseUrl, dropDatabase: false });
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
    const reg = await callOn(a.broker, "auth.register", { email: `${uniqueName("r")}@example.com`, name: "R", password: "password-123" }, { clientIp: "10.0.0.1" });
    const caller: Caller = { clientId: reg.client.id, role: "client", via: "jwt" };
    const first = (await callOn(a.broker, "auth.createApiKey", {}, { caller })).apiKey;
    expect(await callOn(b.broker, "auth.resolveApiKey", { key: first })).toEqual({ clientId: reg.client.id, role: "client", via: "apiKey" });
    const second = (await callOn(b.broker, "auth.createApiKey", {}, { caller })).apiKey;
    expect(await callOn(a.broker, "auth.resolveApiKey", { key: first })).toBeNull();
    expect(await callOn(a.broker, "auth.resolveApiKey", { key: second })).not.toBeNull();
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

  it("auth - actions requiring a caller refuse calls without one", async () => {
    await expect(callOn(a.broker, "auth.me", {})).rejects.toMatchObject({ code: 401, type: "UNAUTHORIZED" });
    await expect(callOn(a.broker, "auth.createApiKey", {}, { caller: { clientId: "x", role: "client", via: "apiKey" } })).rejects.toMatchObject({ code: 403 });
  });
});

describe("platform - migrations", () => {
  it("platform - replicas starting at once create the database and apply each migration once", async () => {
    const url = testDatabaseUrl();
    try {
      await Promise.all([ensureDatabase(url), ensureDatabase(url), ensureDatabase(url)]);
      const pools = [1, 2, 3].map(() => new Pool({ connectionString: url }).on("error", () => undefined));
      const applied = await Promise.all(pools.map((p) => migrate(p, "auth", migrations)));
      expect(applied.flat()).toEqual([1]);
      const rows = (await pools[0].query("SELECT version FROM auth.schema_migrations")).rows;
      expect(rows).toEqual([{ version: 1 }]);
      await Promise.all(pools.map((p) => p.end()));
    } finally {
      await dropDatabase(url);
    }
  });
});
