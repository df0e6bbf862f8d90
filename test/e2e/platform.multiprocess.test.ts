/**
 * The two runtime modes as an operator starts them: every service in one process on the
 * in-process bus, and gateway and auth in separate Node processes finding each other over NATS.
 */
import { http, uniqueName, waitFor } from "../support/platform";
import { NatsPlatform, startNatsPlatform } from "../support/nats-platform";

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

/** Waits until the platform answers login (a wrong password: 401). */
const answersLogin = (platform: NatsPlatform) =>
  platform.waitFor(
    async () => {
      const res = await http(platform.baseUrl, "POST", "/api/auth/login", { body: { email: "probe@example.com", password: "probe-password" } }).catch(
        () => undefined,
      );
      return res && res.status === 401;
    },
    { timeoutMs: 30_000, message: "the platform to answer login" },
  );

describe("platform - runtime modes", () => {
  const platforms: NatsPlatform[] = [];
  afterEach(async () => {
    await Promise.all(platforms.splice(0).map((p) => p.stop()));
  });

  it("platform - one process, in-process bus (npm start)", async () => {
    const platform = await startNatsPlatform({ transporter: "", processes: [["api-gateway", "auth"]], ready: answersLogin });
    platforms.push(platform);
    await fullFlow(platform.baseUrl);
  });

  it("platform - gateway and auth in separate processes over NATS", async () => {
    const platform = await startNatsPlatform({
      prefix: "mp",
      env: { JWT_SECRET: "shared-secret" },
      processes: [["api-gateway"], ["auth"]],
      ready: answersLogin,
    });
    platforms.push(platform);
    const [, auth] = platform.children;
    const base = platform.baseUrl;
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
