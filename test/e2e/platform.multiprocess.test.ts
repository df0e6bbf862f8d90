/**
 * The two runtime modes as an operator starts them: every service in one process on the
 * in-process bus, and gateway and auth in separate Node processes finding each other over NATS.
 */
import { ChildService, dropDatabase, freePort, http, NATS_URL, spawnServices, testDatabaseUrl, uniqueName, waitFor } from "../support/platform";

async function fullFlow(base: string) {
  const address = `${uniqueName("mp")}@example.com`;
  const reg = await http(base, "POST", "/api/auth/register", { body: { email: address, name: "Multi", password: "password-123" } });
  expect(reg.status).toBe(201);
  const key = await http(base, "POST", "/api/auth/api-keys", { token: reg.body.accessToken });
  expect(key.status).toBe(201);
  const me = await http(base, "GET", "/api/auth/me", { headers: { "x-api-key": key.body.apiKey } });
  expect(me.status).toBe(200);
  expect(me.body.email).toBe(address);
  const login = await http(base, "POST", "/api/auth/login", { body: { email: address, password: "password-123" } });
  expect(login.status).toBe(200);
}

async function waitReady(base: string, children: ChildService[]) {
  await waitFor(
    async () => {
      for (const c of children) if (c.proc.exitCode !== null) throw new Error(`a service process exited:\n${c.output()}`);
      const res = await http(base, "POST", "/api/auth/login", { body: { email: "probe@example.com", password: "probe-password" } }).catch(() => undefined);
      return res && res.status === 401;
    },
    { timeoutMs: 30_000, message: "the platform to answer login" },
  );
}

describe("platform - runtime modes", () => {
  const children: ChildService[] = [];
  const databases: string[] = [];
  afterEach(async () => {
    await Promise.all(children.splice(0).map((c) => c.stop("SIGKILL")));
    await Promise.all(databases.splice(0).map((d) => dropDatabase(d).catch(() => undefined)));
  });

  it("platform - one process, in-process bus (npm start)", async () => {
    const port = await freePort();
    const databaseUrl = testDatabaseUrl();
    databases.push(databaseUrl);
    const all = spawnServices(["api-gateway", "auth"], { PORT: String(port), DATABASE_URL: databaseUrl, TRANSPORTER: "" });
    children.push(all);
    const base = `http://127.0.0.1:${port}`;
    await waitReady(base, children);
    await fullFlow(base);
  });

  it("platform - gateway and auth in separate processes over NATS", async () => {
    const port = await freePort();
    const databaseUrl = testDatabaseUrl();
    databases.push(databaseUrl);
    const env = { TRANSPORTER: NATS_URL, NAMESPACE: uniqueName("mp"), DATABASE_URL: databaseUrl, JWT_SECRET: "shared-secret" };
    const gateway = spawnServices(["api-gateway"], { ...env, PORT: String(port), NODE_ID: uniqueName("gw") });
    const auth = spawnServices(["auth"], { ...env, NODE_ID: uniqueName("auth") });
    children.push(gateway, auth);
    const base = `http://127.0.0.1:${port}`;
    await waitReady(base, children);
    await fullFlow(base);

    // auth's route documentation (its actions' `openapi`) reaches the gateway with the registry over NATS
    const doc = (await http(base, "GET", "/api/openapi.json")).body;
    const login = doc.paths["/api/auth/login"].post;
    expect(login).toMatchObject({ summary: "Log in (a fresh 24-hour JWT)", tags: ["auth"] });
    expect(login["x-undocumented"]).toBeUndefined();
    expect(login.responses["200"].content["application/json"].schema).toEqual({ $ref: "#/components/schemas/AuthResult" });
    expect(doc.components.schemas.AuthResult.properties.client).toEqual({ $ref: "#/components/schemas/Client" });

    // auth gone: its paths answer 503 (retry later), in the contract's shape, naming no service
    await auth.stop("SIGTERM");
    const down = await waitFor(
      async () => {
        const res = await http(base, "POST", "/api/auth/login", { body: { email: "a@example.com", password: "password-123" } });
        return res.status === 503 ? res : false;
      },
      { timeoutMs: 30_000, message: "the gateway to notice auth is gone" },
    );
    expect(down.body.error.code).toBe("SERVICE_UNAVAILABLE");
    expect(down.text).not.toMatch(/auth\.|node/i);
  });
});
