/**
 * Attacks on caller identity, replayed against real servers: gateway and services as separate
 * brokers on the shared NATS (own namespace), real PostgreSQL (platform and tenant servers).
 * A rogue Moleculer broker joins the namespace, as anyone who can reach NATS could.
 */
import { generateKeyPairSync, randomBytes } from "crypto";
import jwt from "jsonwebtoken";
import { Context, ServiceBroker } from "moleculer";
import { connect, NatsConnection } from "nats";
import { Client } from "pg";
import { signedCallerMeta } from "../../lib/caller-keys";
import { privateKeyFrom, rawPublicKeyOf, signCallerToken } from "../../lib/caller-token";
import type { Caller } from "../../lib/identity";
import { hashApiKey } from "../../services/auth/api-keys";
import { startDbaasNatsPlatform, stopDbaasPlatform } from "../integration/dbaas.helpers";
import { http, NATS_URL, uniqueName, waitFor } from "../support/platform";
import { NatsPlatform, startNatsPlatform } from "../support/nats-platform";

const SECRET = "identity-test-secret";
const SIGNING_SEED = randomBytes(32).toString("base64"); // the gateway's CALLER_SIGNING_KEY in this test
const GATEWAY_KEYS = { production: false, callerSigningKey: SIGNING_SEED }; // what trusted in-process code signs with here
let platform: NatsPlatform;
let base: string;
const rogues: ServiceBroker[] = [];

const email = (tag: string) => `${uniqueName(tag)}@example.com`;

async function sql<T = any>(text: string, values: unknown[] = []): Promise<T[]> {
  const client = new Client({ connectionString: platform.databaseUrl });
  await client.connect();
  try {
    return (await client.query(text, values)).rows;
  } finally {
    await client.end();
  }
}

async function register(tag: string, password = "password-123", headers: Record<string, string> = {}) {
  const res = await http(base, "POST", "/api/auth/register", { body: { email: email(tag), name: "Victim", password }, headers });
  expect(res.status).toBe(201);
  return res.body as { accessToken: string; client: { id: string; email: string } };
}

/** A broker on the same NATS namespace, with Moleculer's stock transporter: what an attacker runs. */
async function rogue(nodeID: string, services: Parameters<ServiceBroker["createService"]>[0][] = []): Promise<ServiceBroker> {
  const broker = new ServiceBroker({ namespace: platform.namespace, transporter: NATS_URL, nodeID, logger: false });
  for (const s of services) broker.createService(s);
  rogues.push(broker);
  await broker.start();
  await broker.waitForServices(["auth", "dbaas", "gpu-scheduler"], 15_000);
  return broker;
}

beforeAll(async () => {
  const env = {
    JWT_SECRET: SECRET,
    CALLER_SIGNING_KEY: SIGNING_SEED,
    TRUST_PROXY: "true",
    AUTH_RATE_LIMIT_PER_EMAIL: "3",
    AUTH_RATE_LIMIT_PER_IP: "10000",
  };
  // The gateway in a process of its own; the services on a broker here, where a test adds one of its own.
  platform = await startDbaasNatsPlatform({ env, processes: [["api-gateway"]], local: ["auth", "dbaas", "gpu-scheduler"] });
  base = platform.baseUrl;
  await platform.waitForRoute("GET", "/api/auth/me");
  await platform.waitForRoute("GET", "/api/databases");
  await platform.waitForRoute("GET", "/api/gpu/jobs");
}, 90_000);

afterAll(async () => {
  await Promise.all(rogues.map((r) => r.stop()));
  await stopDbaasPlatform(platform);
});

describe("identity - a bus participant without the gateway's key cannot act for an account", () => {
  let victim: { accessToken: string; client: { id: string; email: string } };
  let victimCaller: Caller;
  let databaseId: string;
  let attacker: ServiceBroker;

  beforeAll(async () => {
    victim = await register("victim");
    victimCaller = { clientId: victim.client.id, role: "client", via: "jwt" };
    const db = await http(base, "POST", "/api/databases", { token: victim.accessToken, body: {} });
    expect(db.status).toBe(201);
    databaseId = db.body.id;
    attacker = await rogue(uniqueName("rogue"));
  }, 60_000);

  const victimKeys = async () => (await sql("SELECT 1 FROM auth.api_keys WHERE client_id = $1", [victim.client.id])).length;
  const victimJobs = async () => (await sql("SELECT 1 FROM gpu_scheduler.jobs WHERE client_id = $1", [victim.client.id])).length;

  it("bus - a forged meta.caller cannot create an API key for another account (auth.createApiKey)", async () => {
    await expect(attacker.call("auth.createApiKey", {}, { meta: { caller: victimCaller } })).rejects.toMatchObject({ code: 401, type: "UNAUTHORIZED" });
    expect(await victimKeys()).toBe(0);
  });

  it("bus - a forged meta.caller cannot destroy another account's database (dbaas.destroy)", async () => {
    await expect(attacker.call("dbaas.destroy", { id: databaseId }, { meta: { caller: victimCaller } })).rejects.toMatchObject({ code: 401 });
    const still = await http(base, "GET", `/api/databases/${databaseId}`, { token: victim.accessToken });
    expect(still.status).toBe(200);
  });

  it("bus - a forged meta.caller cannot submit a GPU job for another account (gpu-scheduler.create)", async () => {
    await expect(attacker.call("gpu-scheduler.create", { command: "echo pwned" }, { meta: { caller: victimCaller } })).rejects.toMatchObject({ code: 401 });
    expect(await victimJobs()).toBe(0);
  });

  const badTokens: Array<[string, () => string]> = [
    ["a token signed with another key", () => signCallerToken(victimCaller, Math.floor(Date.now() / 1000) + 60, generateKeyPairSync("ed25519").privateKey)],
    ["an expired token signed with the platform's key", () => signCallerToken(victimCaller, Math.floor(Date.now() / 1000) - 1, privateKeyFrom(SIGNING_SEED))],
    [
      "a token whose payload was changed",
      () => {
        const [, sig] = signedCallerMeta({ ...victimCaller, clientId: "4b6f1c2e-0000-4000-8000-000000000001" }, GATEWAY_KEYS).callerToken.split(".");
        return `${Buffer.from(JSON.stringify({ ...victimCaller, exp: Math.floor(Date.now() / 1000) + 60 })).toString("base64url")}.${sig}`;
      },
    ],
    ["garbage", () => "x.y"],
  ];
  it.each(badTokens)("bus - %s is refused (auth.createApiKey)", async (_name, make) => {
    await expect(attacker.call("auth.createApiKey", {}, { meta: { callerToken: make(), caller: victimCaller } })).rejects.toMatchObject({ code: 401 });
    expect(await victimKeys()).toBe(0);
  });

  it("bus - a valid caller token sent from a non-gateway role is refused (callers)", async () => {
    // A token seen on the bus is valid for a minute: only the roles an action names may use it.
    const asInference = await rogue(`inference.${uniqueName("rogue")}`);
    const asNode = await rogue(`gpu-node.${uniqueName("rogue")}`);
    const stolen = signedCallerMeta(victimCaller, GATEWAY_KEYS);
    await expect(asInference.call("auth.createApiKey", {}, { meta: stolen })).rejects.toMatchObject({ code: 403, type: "FORBIDDEN" });
    await expect(asNode.call("dbaas.destroy", { id: databaseId }, { meta: stolen })).rejects.toMatchObject({ code: 403 });
    await expect(asNode.call("gpu-scheduler.create", { command: "echo pwned" }, { meta: stolen })).rejects.toMatchObject({ code: 403 });
    await expect(asNode.call("auth.resolveApiKey", { keyHash: "0".repeat(64) })).rejects.toMatchObject({ code: 403 });
    await expect(asInference.call("dbaas.stats", {})).rejects.toMatchObject({ code: 403 });
    expect(await victimKeys()).toBe(0);
    expect(await victimJobs()).toBe(0);
    expect((await http(base, "GET", `/api/databases/${databaseId}`, { token: victim.accessToken })).status).toBe(200);
    // the same call from the gateway's role passes the check (the refusals above are the role, not the token)
    const asGateway = await rogue(`api-gateway.${uniqueName("rogue")}`);
    expect(await asGateway.call("auth.me", {}, { meta: stolen })).toMatchObject({ id: victim.client.id });
  });

  it("bus - a remote answer cannot smuggle another caller into the caller's context (meta merge)", async () => {
    const other: Caller = { clientId: "4b6f1c2e-0000-4000-8000-0000000000aa", role: "admin", via: "jwt" };
    await rogue(uniqueName("smuggler"), [
      {
        name: "smuggler",
        actions: {
          echo(ctx: Context<unknown, Record<string, unknown>>) {
            Object.assign(ctx.meta, signedCallerMeta(other, GATEWAY_KEYS)); // merged into the caller's meta on the way back
            return "ok";
          },
        },
      },
    ]);
    const core = platform.local!.broker;
    core.createService({
      name: "probe",
      actions: {
        async whoAmI(ctx: Context<unknown, { caller?: Caller; callerToken?: string }>) {
          await ctx.call("smuggler.echo");
          return { caller: ctx.meta.caller, token: ctx.meta.callerToken };
        },
      },
    });
    await core.waitForServices(["smuggler", "probe"], 10_000);
    const mine = signedCallerMeta(victimCaller, GATEWAY_KEYS);
    expect(await core.call("probe.whoAmI", {}, { meta: mine })).toEqual({ caller: victimCaller, token: mine.callerToken });
  });
});

describe("identity - JWT rules", () => {
  const now = () => Math.floor(Date.now() / 1000);
  let accountId: string;
  beforeAll(async () => {
    accountId = (await register("jwt")).client.id;
  });
  const sign = (claims: Record<string, unknown>, opts: jwt.SignOptions = {}) =>
    jwt.sign({ role: "client", jti: "j", ...claims }, SECRET, { algorithm: "HS256", ...opts });
  const cases: Array<[string, () => string]> = [
    ["a JWT without exp", () => sign({ sub: accountId })],
    ["a JWT with a 100-year exp", () => sign({ sub: accountId, exp: now() + 100 * 365 * 86_400 })],
    ["a JWT living longer than 24 h (exp - iat)", () => sign({ sub: accountId, iat: now() - 60, exp: now() - 60 + 86_400 + 3600 })],
    ["a JWT issued in the future", () => sign({ sub: accountId, iat: now() + 3600, exp: now() + 7200 })],
    ["a JWT with a non-UUID sub", () => sign({ sub: "' OR 1=1 --", exp: now() + 600 })],
    ["a JWT for an account that does not exist", () => sign({ sub: "4b6f1c2e-0000-4000-8000-00000000dead", exp: now() + 600 })],
  ];
  it.each(cases)("jwt - %s is 401, not 500", async (_name, make) => {
    const res = await http(base, "GET", "/api/auth/me", { token: make() });
    expect(res.status).toBe(401);
    expect(res.body.error.code).toBe("UNAUTHORIZED");
    expect(res.headers.get("x-request-id")).toBeTruthy();
  });
  it("jwt - the tokens the platform issues are still accepted", async () => {
    const { accessToken } = await register("issued");
    expect((await http(base, "GET", "/api/auth/me", { token: accessToken })).status).toBe(200);
  });
});

describe("identity - API keys", () => {
  it("api key - an overlong key is 401 UNAUTHORIZED, not 400", async () => {
    const long = "ci_" + "a".repeat(5000);
    for (const headers of [{ "x-api-key": long }, { authorization: `Bearer ${long}` }] as Record<string, string>[]) {
      const res = await http(base, "GET", "/api/auth/me", { headers });
      expect(res.status).toBe(401);
      expect(res.body.error.code).toBe("UNAUTHORIZED");
    }
  });

  it("api key - the plaintext key never crosses the bus, only its SHA-256", async () => {
    const { accessToken } = await register("sniffed");
    const key = (await http(base, "POST", "/api/auth/api-keys", { token: accessToken })).body.apiKey as string;
    const seen: string[] = [];
    const nc: NatsConnection = await connect({ servers: NATS_URL.replace("nats://", "") });
    try {
      const sub = nc.subscribe(`MOL-${platform.namespace}.>`, { callback: (_err, msg) => seen.push(Buffer.from(msg.data).toString("latin1")) });
      await nc.flush();
      expect((await http(base, "GET", "/api/auth/me", { headers: { "x-api-key": key } })).status).toBe(200);
      expect((await http(base, "GET", "/api/auth/me", { token: key })).status).toBe(200);
      // The second request may be answered from the gateway's resolved-key cache (≤ 1 s): one lookup at least.
      await waitFor(() => seen.some((m) => m.includes(hashApiKey(key))), { message: "the key's hash on the bus" });
      sub.unsubscribe();
    } finally {
      await nc.close();
    }
    expect(seen.some((m) => m.includes(key) || m.includes(key.slice(3)))).toBe(false);
  });
});

describe("identity - failed logins cannot lock the owner out", () => {
  const from = (address: string) => ({ "x-forwarded-for": address });
  it("login - failures from one address block that address only; the owner elsewhere still logs in", async () => {
    const owner = await register("lockout", "owner-password-1", from("198.51.100.7"));
    const login = (password: string, address: string) =>
      http(base, "POST", "/api/auth/login", { body: { email: owner.client.email, password }, headers: from(address) });
    const attack: number[] = [];
    for (let i = 0; i < 6; i++) attack.push((await login("guess-" + i, "203.0.113.66")).status);
    expect(attack).toEqual([401, 401, 401, 429, 429, 429]); // AUTH_RATE_LIMIT_PER_EMAIL=3 per (e-mail, address)
    expect((await login("owner-password-1", "203.0.113.66")).status).toBe(429); // that address stays blocked
    expect((await login("owner-password-1", "198.51.100.7")).status).toBe(200);
    expect((await login("a-typo", "198.51.100.7")).status).toBe(401);
    expect((await login("owner-password-1", "198.51.100.7")).status).toBe(200);
  });
});

describe("identity - the private key lives in the gateway process only", () => {
  let keys: NatsPlatform | undefined;
  afterAll(() => keys?.stop());

  it("keys - auth with only the public key serves the gateway's callers; a process with another key refuses them", async () => {
    const seed = randomBytes(32).toString("base64");
    keys = await startNatsPlatform({
      prefix: "keys",
      // Empty values: the children must not inherit this test process's keys.
      env: { JWT_SECRET: SECRET, CALLER_SIGNING_KEY: "", CALLER_VERIFY_KEY: "" },
      processes: [
        { services: ["api-gateway"], env: { CALLER_SIGNING_KEY: seed } },
        { services: ["auth"], env: { CALLER_VERIFY_KEY: rawPublicKeyOf(privateKeyFrom(seed)) } },
      ],
    });
    const base = keys.baseUrl;
    const register = () => http(base, "POST", "/api/auth/register", { body: { email: email("keys"), name: "K", password: "password-123" } });
    const reg = await keys.waitFor(
      async () => {
        const res = await register().catch(() => undefined);
        return res?.status === 201 ? res : undefined;
      },
      { timeoutMs: 40_000, message: "gateway and auth over NATS" },
    );
    expect((await http(base, "GET", "/api/auth/me", { token: reg.body.accessToken })).status).toBe(200);

    // auth restarted with a public key that is not the gateway's: every account action is refused
    await keys.children[1].stop();
    keys.spawn(["auth"], { CALLER_VERIFY_KEY: rawPublicKeyOf(generateKeyPairSync("ed25519").privateKey) });
    const refused = await keys.waitFor(
      async () => {
        const res = await http(base, "GET", "/api/auth/me", { token: reg.body.accessToken });
        return res.status === 401 ? res : undefined;
      },
      { timeoutMs: 40_000, message: "auth with the wrong public key to answer" },
    );
    expect(refused.body.error.code).toBe("UNAUTHORIZED");
    expect((await register()).status).toBe(201); // public actions still work
  });
});
