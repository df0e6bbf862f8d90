/**
 * Attacks on restricted tokens, replayed against real servers: the gateway in a process of its own,
 * auth on a broker here, on the shared NATS; a rogue Moleculer broker joins the namespace as anyone
 * who can reach NATS could. Only gpu-scheduler may mint or revoke a job's token, only inference may
 * report a token's spend, and a token itself never crosses the bus, only its SHA-256.
 */
import { randomUUID } from "crypto";
import { ServiceBroker } from "moleculer";
import { connect } from "nats";
import { hashApiKey } from "../../services/auth/api-keys";
import { http, NATS_URL, uniqueName, waitFor } from "../support/platform";
import { NatsPlatform, startNatsPlatform } from "../support/nats-platform";

let platform: NatsPlatform;
let base: string;
const rogues: ServiceBroker[] = [];

beforeAll(async () => {
  platform = await startNatsPlatform({
    prefix: "sectok",
    env: { JWT_SECRET: "security-tokens-secret", AUTH_RATE_LIMIT_PER_IP: "10000" },
    processes: [["api-gateway"]],
    local: ["auth"],
  });
  base = platform.baseUrl;
  await platform.waitForRoute("GET", "/api/auth/me");
}, 90_000);
afterAll(async () => {
  await Promise.all(rogues.map((r) => r.stop()));
  await platform?.stop();
});

async function rogue(nodeID: string): Promise<ServiceBroker> {
  const broker = new ServiceBroker({ namespace: platform.namespace, transporter: NATS_URL, nodeID, logger: false });
  rogues.push(broker);
  await broker.start();
  await broker.waitForServices(["auth"], 15_000);
  return broker;
}

async function account(): Promise<{ jwt: string; id: string }> {
  const reg = await http(base, "POST", "/api/auth/register", { body: { email: `${uniqueName("sec")}@example.com`, name: "V", password: "password-123" } });
  expect(reg.status).toBe(201);
  return { jwt: reg.body.accessToken, id: reg.body.client.id };
}

describe("tokens - who may mint, revoke and charge tokens over the bus", () => {
  it.each(["gpu-node.evil", "inference.evil", "dbaas.evil"])("bus - %s cannot mint a job's token for an account (auth.issueJobToken)", async (nodeID) => {
    const victim = await account();
    const broker = await rogue(`${nodeID}-${randomUUID().slice(0, 8)}`);
    const params = { clientId: victim.id, jobId: randomUUID(), scopes: ["inference"], expiresInSeconds: 3600 };
    await expect(broker.call("auth.issueJobToken", params)).rejects.toMatchObject({ code: 403 });
    expect((await http(base, "GET", "/api/auth/tokens", { token: victim.jwt })).body.tokens).toEqual([]);
  });

  it("bus - a gpu-node cannot revoke a job's tokens, nor charge a token's credits", async () => {
    const victim = await account();
    const jobId = randomUUID();
    const issued = await platform.local!.broker.call<{ id: string; token: string }, object>("auth.issueJobToken", {
      clientId: victim.id,
      jobId,
      scopes: ["usage:read"],
      expiresInSeconds: 600,
    });
    const broker = await rogue(`gpu-node.evil-${randomUUID().slice(0, 8)}`);
    await expect(broker.call("auth.revokeJobTokens", { jobId })).rejects.toMatchObject({ code: 403 });
    await expect(broker.call("auth.addTokenCredits", { spent: [{ id: issued.id, credits: 1e9 }] })).rejects.toMatchObject({ code: 403 });
    expect((await http(base, "GET", "/api/auth/tokens", { token: victim.jwt })).body.tokens).toEqual([
      expect.objectContaining({ id: issued.id, creditsUsed: 0 }),
    ]);
    expect((await http(base, "GET", "/api/auth/me", { token: issued.token })).status).toBe(200);
  });
});

describe("tokens - on the wire", () => {
  it("bus - a restricted token in a request never crosses the bus, only its SHA-256; an overlong one is 401", async () => {
    const owner = await account();
    const token = (await http(base, "POST", "/api/auth/tokens", { token: owner.jwt, body: { name: "sniffed", scopes: ["usage:read"] } })).body.token as string;
    const seen: string[] = [];
    const nc = await connect({ servers: NATS_URL.replace("nats://", "") });
    try {
      const sub = nc.subscribe(`MOL-${platform.namespace}.>`, { callback: (_err, msg) => seen.push(Buffer.from(msg.data).toString("latin1")) });
      await nc.flush();
      expect((await http(base, "GET", "/api/auth/me", { token })).status).toBe(200);
      expect((await http(base, "GET", "/api/auth/me", { headers: { "x-api-key": token } })).status).toBe(200);
      await waitFor(() => seen.some((m) => m.includes(hashApiKey(token))), { message: "the token's hash on the bus" });
      sub.unsubscribe();
    } finally {
      await nc.close();
    }
    expect(seen.some((m) => m.includes(token) || m.includes(token.slice(4)))).toBe(false);
    const long = "cit_" + "a".repeat(5000);
    expect((await http(base, "GET", "/api/auth/me", { token: long })).body.error.code).toBe("UNAUTHORIZED");
  });
});
