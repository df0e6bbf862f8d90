/**
 * Accounts through the HTTP gateway, one process, real PostgreSQL: every auth endpoint, the
 * error contract, malformed bodies, JWT tampering, key rotation, concurrent registration.
 */
import jwt from "jsonwebtoken";
import { Client } from "pg";
import { Errors, ServiceSchema } from "moleculer";
import { http, startTestPlatform, TestPlatform, waitForRoute } from "../support/platform";

let platform: TestPlatform;
let base: string;
const SECRET = "e2e-secret";

const ADMIN_EMAIL = `ops-${Math.random().toString(36).slice(2, 10)}@example.com`;
const email = (tag: string) => `${tag}-${Math.random().toString(36).slice(2, 10)}@example.com`;

async function register(tag = "user", password = "password-123") {
  const res = await http(base, "POST", "/api/auth/register", { body: { email: email(tag), name: "Test User", password } });
  expect(res.status).toBe(201);
  return res.body as { accessToken: string; client: { id: string; email: string; name: string; role: string } };
}

async function countClients(): Promise<number> {
  const client = new Client({ connectionString: platform.databaseUrl });
  await client.connect();
  try {
    return Number((await client.query("SELECT count(*) FROM auth.clients")).rows[0].count);
  } finally {
    await client.end();
  }
}

function expectError(res: { status: number; body: any; headers: Headers }, status: number, code: string) {
  expect(res.status).toBe(status);
  expect(Object.keys(res.body ?? {})).toEqual(["error"]);
  expect(Object.keys(res.body.error).sort()).toEqual(["code", "details", "message"]);
  expect(res.body.error.code).toBe(code);
  expect(typeof res.body.error.message).toBe("string");
  expect(res.headers.get("x-request-id")).toBeTruthy();
}

const Leaky: ServiceSchema = {
  name: "leaky",
  settings: { rest: "/leaky" },
  actions: {
    boom: {
      rest: "GET /boom",
      auth: "public",
      handler() {
        throw new Error('duplicate key value violates unique constraint "clients_email_key" on host db-internal-7');
      },
    } as never,
    slowpoke: {
      rest: "GET /client-error",
      auth: "public",
      handler() {
        throw new Errors.MoleculerClientError("Nope", 409, "INVALID_STATE", null);
      },
    } as never,
    operators: {
      rest: "GET /operators",
      auth: "admin",
      handler(ctx: { meta: { caller?: { clientId: string; role: string } } }) {
        return { caller: ctx.meta.caller };
      },
    } as never,
  },
};

beforeAll(async () => {
  platform = await startTestPlatform({
    services: ["api-gateway", "auth"],
    env: { JWT_SECRET: SECRET, AUTH_RATE_LIMIT_PER_IP: "10000", ADMIN_EMAILS: ` other@example.com, ${ADMIN_EMAIL.toUpperCase()} ` },
  });
  platform.broker.createService(Leaky);
  base = platform.baseUrl;
  await waitForRoute(base, "GET", "/api/leaky/boom");
  await waitForRoute(base, "GET", "/api/auth/me");
});
afterAll(() => platform?.stop());

describe("auth - register and login", () => {
  it("auth - register returns a JWT and the client with role client", async () => {
    const res = await http(base, "POST", "/api/auth/register", { body: { email: "  Mixed.Case@Example.COM ", name: "Ada", password: "password-123" } });
    expect(res.status).toBe(201);
    expect(res.body.client).toEqual({ id: expect.stringMatching(/^[0-9a-f-]{36}$/), email: "mixed.case@example.com", name: "Ada", role: "client" });
    const claims = jwt.verify(res.body.accessToken, SECRET, { algorithms: ["HS256"] }) as jwt.JwtPayload;
    expect(claims.sub).toBe(res.body.client.id);
    expect(claims.exp! - claims.iat!).toBe(86_400);
    expect(claims.jti).toBeTruthy();
  });

  it("auth - the same e-mail in another case is 409 EMAIL_TAKEN", async () => {
    const first = await register("dup");
    const res = await http(base, "POST", "/api/auth/register", { body: { email: first.client.email.toUpperCase(), name: "Other", password: "password-456" } });
    expectError(res, 409, "EMAIL_TAKEN");
  });

  it("auth - login works and e-mail is case-insensitive", async () => {
    const { client } = await register("login");
    const res = await http(base, "POST", "/api/auth/login", { body: { email: client.email.toUpperCase(), password: "password-123" } });
    expect(res.status).toBe(200);
    expect(res.body.client).toEqual(client);
    expect(typeof res.body.accessToken).toBe("string");
  });

  it("auth - unknown e-mail and wrong password get the identical 401", async () => {
    const { client } = await register("wrong");
    const wrongPassword = await http(base, "POST", "/api/auth/login", { body: { email: client.email, password: "not-the-password" } });
    const unknownEmail = await http(base, "POST", "/api/auth/login", { body: { email: email("nobody"), password: "not-the-password" } });
    expectError(wrongPassword, 401, "UNAUTHORIZED");
    expect(unknownEmail.status).toBe(401);
    expect(unknownEmail.body).toEqual(wrongPassword.body);
  });

  it("auth - concurrent registration of one e-mail: exactly one wins", async () => {
    const address = email("race");
    const results = await Promise.all(
      Array.from({ length: 8 }, () => http(base, "POST", "/api/auth/register", { body: { email: address, name: "Racer", password: "password-123" } })),
    );
    expect(results.filter((r) => r.status === 201)).toHaveLength(1);
    expect(results.filter((r) => r.status === 409)).toHaveLength(7);
  });
});

describe("auth - the admin role", () => {
  it("auth - an account whose e-mail is in ADMIN_EMAILS is admin and may use admin routes, with a JWT or its API key", async () => {
    const res = await http(base, "POST", "/api/auth/register", { body: { email: ADMIN_EMAIL, name: "Ops", password: "password-123" } });
    expect(res.status).toBe(201);
    expect(res.body.client.role).toBe("admin");
    const jwtRes = await http(base, "GET", "/api/leaky/operators", { token: res.body.accessToken });
    expect(jwtRes.status).toBe(200);
    expect(jwtRes.body.caller).toMatchObject({ clientId: res.body.client.id, role: "admin" });
    const key = await http(base, "POST", "/api/auth/api-keys", { token: res.body.accessToken });
    expect((await http(base, "GET", "/api/leaky/operators", { token: key.body.apiKey })).status).toBe(200);
    const login = await http(base, "POST", "/api/auth/login", { body: { email: ADMIN_EMAIL, password: "password-123" } });
    expect(login.body.client.role).toBe("admin");
  });

  it("auth - anyone else gets 403 FORBIDDEN on an admin route (401 without credentials)", async () => {
    const { accessToken } = await register("notadmin");
    expectError(await http(base, "GET", "/api/leaky/operators", { token: accessToken }), 403, "FORBIDDEN");
    expectError(await http(base, "GET", "/api/leaky/operators"), 401, "UNAUTHORIZED");
  });

  it("auth - a role in the register body, or a forged admin claim in a token, does not make an admin", async () => {
    // A field the platform does not know is 400 naming it (API-DECISIONS Part 3), and no account is made.
    const account = { email: email("sneaky"), name: "Sneaky", password: "password-123" };
    const refused = await http(base, "POST", "/api/auth/register", { body: { ...account, role: "admin" } });
    expectError(refused, 400, "VALIDATION_FAILED");
    expect(refused.body.error.details).toEqual([expect.objectContaining({ field: "role" })]);
    const res = await http(base, "POST", "/api/auth/register", { body: account });
    expect(res.status).toBe(201);
    expect(res.body.client.role).toBe("client");
    const forged = jwt.sign({ role: "admin", jti: "forged" }, SECRET, { subject: res.body.client.id, algorithm: "HS256", expiresIn: 3600 });
    expectError(await http(base, "GET", "/api/leaky/operators", { token: forged }), 403, "FORBIDDEN");
    const me = await http(base, "GET", "/api/auth/me", { token: res.body.accessToken });
    expect(me.body.role).toBe("client");
  });
});

describe("auth - validation: bad input is 400 and stores nothing", () => {
  const register: Array<[string, unknown]> = [
    ["empty body", {}],
    ["missing password", { email: "a@example.com", name: "A" }],
    ["short password", { email: "a@example.com", name: "A", password: "1234567" }],
    ["long password", { email: "a@example.com", name: "A", password: "x".repeat(129) }],
    ["invalid e-mail", { email: "not-an-email", name: "A", password: "password-123" }],
    ["e-mail as number", { email: 42, name: "A", password: "password-123" }],
    ["missing name", { email: "a@example.com", password: "password-123" }],
    ["empty name", { email: "a@example.com", name: "   ", password: "password-123" }],
    ["password as array", { email: "a@example.com", name: "A", password: ["password-123"] }],
  ];
  it.each(register)("register - %s", async (_name, body) => {
    const before = await countClients();
    const res = await http(base, "POST", "/api/auth/register", { body });
    expectError(res, 400, "VALIDATION_FAILED");
    expect(Array.isArray(res.body.error.details)).toBe(true);
    expect(res.body.error.details[0]).toEqual({ field: expect.any(String), message: expect.any(String) });
    expect(await countClients()).toBe(before);
  });

  const login: Array<[string, unknown]> = [
    ["empty body", {}],
    ["missing password", { email: "a@example.com" }],
    ["e-mail as object", { email: { $ne: "" }, password: "password-123" }],
  ];
  it.each(login)("login - %s", async (_name, body) => {
    expectError(await http(base, "POST", "/api/auth/login", { body }), 400, "VALIDATION_FAILED");
  });

  const raw: Array<[string, string, Record<string, string>, number, string]> = [
    ["malformed JSON", "{bad", { "content-type": "application/json" }, 400, "INVALID_JSON"],
    ["JSON array", "[1,2]", { "content-type": "application/json" }, 400, "INVALID_JSON"],
    ["JSON string", '"hello"', { "content-type": "application/json" }, 400, "INVALID_JSON"],
    ["text/plain body", "email=a", { "content-type": "text/plain" }, 415, "UNSUPPORTED_MEDIA_TYPE"],
    ["form body", "email=a&password=b", { "content-type": "application/x-www-form-urlencoded" }, 415, "UNSUPPORTED_MEDIA_TYPE"],
    [
      "over 1 MiB",
      JSON.stringify({ email: "a@example.com", name: "x".repeat(1100 * 1024), password: "password-123" }),
      { "content-type": "application/json" },
      413,
      "PAYLOAD_TOO_LARGE",
    ],
  ];
  it.each(raw)("register - %s", async (_name, rawBody, headers, status, code) => {
    const before = await countClients();
    expectError(await http(base, "POST", "/api/auth/register", { rawBody, headers }), status, code);
    expect(await countClients()).toBe(before);
  });
});

describe("auth - credentials", () => {
  it("auth - /me answers with a JWT, an API key as Bearer and as X-API-Key", async () => {
    const { accessToken, client } = await register("me");
    expect((await http(base, "GET", "/api/auth/me", { token: accessToken })).body).toEqual(client);
    const key = await http(base, "POST", "/api/auth/api-keys", { token: accessToken });
    expect(key.status).toBe(201);
    expect(key.body).toEqual({ apiKey: expect.stringMatching(/^ci_[a-z0-9]{32}$/) });
    expect((await http(base, "GET", "/api/auth/me", { token: key.body.apiKey })).body).toEqual(client);
    expect((await http(base, "GET", "/api/auth/me", { headers: { "x-api-key": key.body.apiKey } })).body).toEqual(client);
  });

  it("auth - a new key invalidates the previous one at once", async () => {
    const { accessToken } = await register("rotate");
    const first = (await http(base, "POST", "/api/auth/api-keys", { token: accessToken })).body.apiKey;
    const second = (await http(base, "POST", "/api/auth/api-keys", { token: accessToken })).body.apiKey;
    expect(second).not.toBe(first);
    expectError(await http(base, "GET", "/api/auth/me", { token: first }), 401, "UNAUTHORIZED");
    expect((await http(base, "GET", "/api/auth/me", { token: second })).status).toBe(200);
  });

  it("auth - a key in use (cached by the gateway) is refused at once once replaced: the gateway hears auth's apiKey.replaced", async () => {
    const { accessToken } = await register("cached");
    const first = (await http(base, "POST", "/api/auth/api-keys", { token: accessToken })).body.apiKey;
    for (let i = 0; i < 3; i++) expect((await http(base, "GET", "/api/auth/me", { token: first })).status).toBe(200);
    const second = (await http(base, "POST", "/api/auth/api-keys", { token: accessToken })).body.apiKey;
    // one process: the broadcast reaches the gateway before the replacement answers (over NATS the 1 s bound holds: auth.key-cache.test.ts)
    expectError(await http(base, "GET", "/api/auth/me", { token: first }), 401, "UNAUTHORIZED");
    expect((await http(base, "GET", "/api/auth/me", { token: second })).status).toBe(200);
  });

  it("auth - an API key cannot mint a key (403), and no credentials is 401", async () => {
    const { accessToken } = await register("mint");
    const key = (await http(base, "POST", "/api/auth/api-keys", { token: accessToken })).body.apiKey;
    expectError(await http(base, "POST", "/api/auth/api-keys", { token: key }), 403, "FORBIDDEN");
    expectError(await http(base, "POST", "/api/auth/api-keys", { headers: { "x-api-key": key } }), 403, "FORBIDDEN");
    expectError(await http(base, "POST", "/api/auth/api-keys"), 401, "UNAUTHORIZED");
    // the refused attempts did not rotate the key
    expect((await http(base, "GET", "/api/auth/me", { token: key })).status).toBe(200);
  });

  it("auth - the stored key is a hash, never the key", async () => {
    const { accessToken, client } = await register("hash");
    const key = (await http(base, "POST", "/api/auth/api-keys", { token: accessToken })).body.apiKey as string;
    const pg = new Client({ connectionString: platform.databaseUrl });
    await pg.connect();
    const row = (await pg.query("SELECT key_hash FROM auth.api_keys WHERE client_id = $1", [client.id])).rows[0];
    const pw = (await pg.query("SELECT password_hash FROM auth.clients WHERE id = $1", [client.id])).rows[0];
    await pg.end();
    expect(row.key_hash).not.toContain(key.slice(3));
    expect(pw.password_hash).toMatch(/^scrypt\$/);
  });

  describe("auth - tampered JWTs are 401", () => {
    let token: string;
    let clientId: string;
    beforeAll(async () => {
      const r = await register("tamper");
      token = r.accessToken;
      clientId = r.client.id;
    });
    const forge: Array<[string, () => string]> = [
      ["alg none", () => jwt.sign({ role: "admin", sub: clientId, jti: "x" }, "", { algorithm: "none" })],
      [
        "changed payload",
        () => {
          const [h, , s] = token.split(".");
          const payload = Buffer.from(JSON.stringify({ sub: clientId, role: "admin", jti: "x", iat: 1, exp: 9999999999 })).toString("base64url");
          return `${h}.${payload}.${s}`;
        },
      ],
      ["wrong key", () => jwt.sign({ role: "client", jti: "x" }, "another-secret", { subject: clientId, expiresIn: 3600 })],
      ["expired", () => jwt.sign({ role: "client", jti: "x", exp: Math.floor(Date.now() / 1000) - 5 }, SECRET, { subject: clientId })],
      ["garbage", () => "not.a.jwt"],
    ];
    it.each(forge)("%s", async (_name, make) => {
      const res = await http(base, "GET", "/api/auth/me", { token: make() });
      expectError(res, 401, "UNAUTHORIZED");
    });
    it("auth - the genuine token still works", async () => {
      expect((await http(base, "GET", "/api/auth/me", { token })).status).toBe(200);
    });
  });
});

describe("gateway - error contract", () => {
  it("gateway - unknown route is 404 NOT_FOUND", async () => {
    expectError(await http(base, "GET", "/api/nothing/here"), 404, "NOT_FOUND");
    expectError(await http(base, "GET", "/elsewhere"), 404, "NOT_FOUND");
  });

  it("gateway - a platform service that is not running answers 503, an unknown path 404", async () => {
    // this platform runs gateway and auth only: gpu-scheduler's and dbaas' paths have no instance
    expectError(await http(base, "GET", "/api/gpu/jobs"), 503, "SERVICE_UNAVAILABLE");
    expectError(await http(base, "POST", "/api/databases", { body: {} }), 503, "SERVICE_UNAVAILABLE");
    expectError(await http(base, "GET", "/api/gpus"), 404, "NOT_FOUND");
    expectError(await http(base, "GET", "/api/auth/nope"), 404, "NOT_FOUND");
  });

  it("gateway - the gateway's own actions are not routed", async () => {
    expectError(await http(base, "GET", "/api/api-gateway/list-aliases"), 404, "NOT_FOUND");
  });

  it("gateway - unexpected errors are 500 INTERNAL with only a request id", async () => {
    const res = await http(base, "GET", "/api/leaky/boom", { headers: { "x-request-id": "trace-abc-123" } });
    expectError(res, 500, "INTERNAL");
    expect(res.body.error.details).toEqual({ requestId: "trace-abc-123" });
    expect(res.text).not.toMatch(/constraint|db-internal|clients_email_key|leaky|stack/);
  });

  it("gateway - client errors keep their code", async () => {
    expectError(await http(base, "GET", "/api/leaky/client-error"), 409, "INVALID_STATE");
  });

  it("gateway - X-Request-Id is echoed when well-formed, generated otherwise", async () => {
    const echoed = await http(base, "GET", "/api/auth/me", { headers: { "x-request-id": "my-id-1" } });
    expect(echoed.headers.get("x-request-id")).toBe("my-id-1");
    const generated = await http(base, "GET", "/api/auth/me", { headers: { "x-request-id": "bad id\twith spaces" } });
    expect(generated.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
    const ok = await http(base, "POST", "/api/auth/login", { body: { email: "x@example.com", password: "whatever-1" } });
    expect(ok.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
  });
});

describe("auth - rate limits", () => {
  it("auth - login is limited per e-mail with 429 and Retry-After", async () => {
    const address = email("limited");
    const statuses: number[] = [];
    let limited: Awaited<ReturnType<typeof http>> | undefined;
    for (let i = 0; i < 12 && !limited; i++) {
      const res = await http(base, "POST", "/api/auth/login", { body: { email: address, password: "wrong-password" } });
      statuses.push(res.status);
      if (res.status === 429) limited = res;
    }
    expect(statuses.slice(0, 10).every((s) => s === 401)).toBe(true); // default 10 per e-mail per minute
    expect(limited).toBeDefined();
    expectError(limited!, 429, "RATE_LIMITED");
    expect(Number(limited!.headers.get("retry-after"))).toBeGreaterThan(0);
  });
});
