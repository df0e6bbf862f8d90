/**
 * Attacks on the gateway below the routes, replayed against a real platform: what Node's HTTP
 * parser refuses, bodies that are not what they claim, slow clients and connection floods. Each
 * answer is the contract's JSON error with an X-Request-Id, and the gateway keeps serving.
 */
import net from "net";
import zlib from "zlib";
import { OllamaStandin } from "../support/provider-standins";
import { openSse } from "../support/sse";
import { http, startTestPlatform, TestPlatform, waitFor, waitForRoute } from "../support/platform";
import { NatsPlatform, startNatsPlatform } from "../support/nats-platform";

type RawAnswer = { status: number; headers: Record<string, string>; body: any; closedAfterMs: number };

/** A chunked body's content (the test bodies are ASCII, so sizes count characters). */
function dechunk(raw: string): string {
  let out = "";
  for (let at = 0; ;) {
    const eol = raw.indexOf("\r\n", at);
    const size = parseInt(raw.slice(at, eol), 16);
    if (!size) return out;
    out += raw.slice(eol + 2, eol + 2 + size);
    at = eol + 2 + size + 2;
  }
}

/** Sends `data` on a fresh TCP connection and reads until the server closes it (or `timeoutMs`). */
function rawExchange(port: number, data: string | Buffer, timeoutMs = 5000): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, "127.0.0.1");
    const started = Date.now();
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`the server kept the connection open for ${timeoutMs} ms`));
    }, timeoutMs);
    socket.on("data", (d) => chunks.push(d));
    socket.on("error", () => undefined); // a reset after the answer is fine: the answer was read
    socket.on("close", () => {
      clearTimeout(timer);
      const text = Buffer.concat(chunks).toString("utf8");
      const [head, ...rest] = text.split("\r\n\r\n");
      const [statusLine, ...lines] = head.split("\r\n");
      const headers = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(":")).toLowerCase(), l.slice(l.indexOf(":") + 1).trim()]));
      let raw = rest.join("\r\n\r\n");
      if (headers["transfer-encoding"] === "chunked") raw = dechunk(raw);
      let body: unknown;
      try {
        body = JSON.parse(raw);
      } catch {
        body = raw;
      }
      resolve({ status: Number(statusLine.split(" ")[1]), headers, body, closedAfterMs: Date.now() - started });
    });
    socket.on("connect", () => socket.write(data));
  });
}

/** An open keep-alive connection that has been answered once (so the server surely counts it), with that answer's status. */
async function heldConnection(port: number): Promise<{ socket: net.Socket; status: number }> {
  const socket = net.connect(port, "127.0.0.1");
  socket.on("error", () => undefined);
  const status = await new Promise<number>((resolve, reject) => {
    let seen = "";
    socket.on("data", (d) => {
      seen += d;
      if (seen.includes("\r\n\r\n")) resolve(Number(seen.split(" ")[1]));
    });
    socket.once("close", () => reject(new Error("held connection closed before its answer")));
    socket.write("GET /api/no-such-route HTTP/1.1\r\nHost: test\r\n\r\n");
  });
  return { socket, status };
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

function expectContractError(answer: RawAnswer, status: number, code: string) {
  expect(answer.status).toBe(status);
  expect(answer.headers["content-type"]).toMatch(/^application\/json/);
  expect(answer.headers["x-request-id"]).toMatch(UUID);
  expect(answer.body).toEqual({ error: { code, message: expect.any(String), details: null } });
}

const HEADERS_TIMEOUT_MS = 600;
const MAX_CONNECTIONS = 4;

describe("http - the gateway below its routes", () => {
  let platform: TestPlatform;
  let ollama: OllamaStandin;
  let port: number;
  let token: string;
  const alive = async () => (await http(platform.baseUrl, "GET", "/api/models/health")).status === 200;

  beforeAll(async () => {
    ollama = await new OllamaStandin().start();
    platform = await startTestPlatform({
      services: ["api-gateway", "auth", "inference"],
      env: {
        OLLAMA_URL: ollama.url,
        GATEWAY_HEADERS_TIMEOUT_MS: String(HEADERS_TIMEOUT_MS),
        GATEWAY_REQUEST_TIMEOUT_MS: "1200",
        GATEWAY_MAX_CONNECTIONS: String(MAX_CONNECTIONS),
        GATEWAY_KEEP_ALIVE_TIMEOUT_MS: "1000",
      },
    });
    port = Number(new URL(platform.baseUrl).port);
    await waitForRoute(platform.baseUrl, "POST", "/api/auth/register");
    await waitForRoute(platform.baseUrl, "POST", "/api/models/infer");
    const reg = await http(platform.baseUrl, "POST", "/api/auth/register", {
      body: { email: `http-${Date.now()}@example.com`, name: "Http", password: "correct horse battery" },
    });
    expect(reg.status).toBe(201);
    token = reg.body.accessToken;
  });

  afterAll(async () => {
    await platform?.stop();
    await ollama?.stop();
  });

  it("http - headers over the size limit get 431 in the error shape with an X-Request-Id, not Node's bare status line", async () => {
    const answer = await rawExchange(port, `GET /api/models HTTP/1.1\r\nHost: test\r\nX-Filler: ${"a".repeat(20_000)}\r\n\r\n`);
    expectContractError(answer, 431, "HEADERS_TOO_LARGE");
    expect(await alive()).toBe(true);
  });

  it.each([
    ["a request line that is not HTTP", "GARBAGE\r\n\r\n"],
    ["a header line without a colon", "GET /api/models HTTP/1.1\r\nHost: test\r\nbroken header\r\n\r\n"],
    ["a NUL byte in a header value", "GET /api/models HTTP/1.1\r\nHost: test\r\nX-Api-Key: ci_\u0000abc\r\n\r\n"],
    [
      "conflicting Content-Length and Transfer-Encoding",
      "POST /api/auth/login HTTP/1.1\r\nHost: test\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    ],
  ])("http - malformed HTTP (%s) gets 400 MALFORMED_REQUEST as JSON with an X-Request-Id", async (_name, request) => {
    const answer = await rawExchange(port, request);
    expectContractError(answer, 400, "MALFORMED_REQUEST");
    expect(await alive()).toBe(true);
  });

  it.each([
    ["an HTTP/1.1 request without Host", "GET /api/models HTTP/1.1\r\n\r\n", 400, "MALFORMED_REQUEST"],
    ["an Expect header other than 100-continue", "GET /api/models HTTP/1.1\r\nHost: test\r\nExpect: teapot\r\n\r\n", 417, "EXPECTATION_FAILED"],
    ["CONNECT (using the gateway as a proxy)", "CONNECT 127.0.0.1:5432 HTTP/1.1\r\nHost: 127.0.0.1:5432\r\n\r\n", 400, "MALFORMED_REQUEST"],
  ])("http - %s, which Node answers with an empty body, gets the contract's JSON and an X-Request-Id", async (_name, request, status, code) => {
    const answer = await rawExchange(port, request);
    expectContractError(answer, status, code);
  });

  it("http - Content-Encoding: gzip on a body that is not gzip is 400, never a 500", async () => {
    const res = await http(platform.baseUrl, "POST", "/api/auth/login", {
      rawBody: JSON.stringify({ email: "a@example.com", password: "password-123" }),
      headers: { "content-type": "application/json", "content-encoding": "gzip" },
    });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe("INVALID_JSON");
    expect(res.headers.get("x-request-id")).toMatch(UUID);
    expect(res.text).not.toMatch(/zlib|Z_DATA_ERROR|at .*\.js/);
  });

  it("http - an unsupported Content-Encoding is 415, and a real gzip body is still understood", async () => {
    const br = await http(platform.baseUrl, "POST", "/api/auth/login", {
      rawBody: "{}",
      headers: { "content-type": "application/json", "content-encoding": "br" },
    });
    expect(br.status).toBe(415);
    expect(br.body.error.code).toBe("UNSUPPORTED_MEDIA_TYPE");
    const res = await fetch(`${platform.baseUrl}/api/auth/login`, {
      method: "POST",
      headers: { "content-type": "application/json", "content-encoding": "gzip" },
      body: zlib.gzipSync(JSON.stringify({ email: "nobody@example.com", password: "password-123" })),
    });
    expect(res.status).toBe(401); // parsed and answered by auth: the encoding itself is fine
  });

  it("http - a gzip bomb inflating past the body limit is 413, not a gigabyte in memory", async () => {
    const bomb = zlib.gzipSync(Buffer.concat([Buffer.from('{"email":"'), Buffer.alloc(20 * 1024 * 1024, 0x61), Buffer.from('"}')]));
    expect(bomb.length).toBeLessThan(100 * 1024);
    const res = await fetch(`${platform.baseUrl}/api/auth/login`, {
      method: "POST",
      headers: { "content-type": "application/json", "content-encoding": "gzip" },
      body: bomb,
    });
    expect(res.status).toBe(413);
    expect((await res.json()).error.code).toBe("PAYLOAD_TOO_LARGE");
  });

  it("http - a login e-mail of 400 KB of 0xFF bytes (1.2 MB once decoded) is 400 and the gateway keeps serving", async () => {
    const body = Buffer.concat([Buffer.from('{"email":"'), Buffer.alloc(400_000, 0xff), Buffer.from('","password":"password-123"}')]);
    const res = await fetch(`${platform.baseUrl}/api/auth/login`, { method: "POST", headers: { "content-type": "application/json" }, body });
    expect(res.status).toBe(400);
    expect(res.headers.get("x-request-id")).toMatch(UUID);
    expect((await res.json()).error.code).toBe("INVALID_JSON");
    expect(await alive()).toBe(true);
  });

  it("http - params bigger than a bus message are 413 at the gateway, before any service is called", async () => {
    const before = ollama.requests.length;
    // 500 K two-byte characters: the body fits its 1 MiB limit, the params do not fit GATEWAY_MAX_PARAMS_BYTES (960 KiB).
    const res = await http(platform.baseUrl, "POST", "/api/models/infer", { token, body: { model: "llama3.2:1b", prompt: "é".repeat(500_000) } });
    expect(res.status).toBe(413);
    expect(res.body.error.code).toBe("PAYLOAD_TOO_LARGE");
    expect(ollama.requests.length).toBe(before);
    expect(await alive()).toBe(true);
  });

  it("http - slowloris: a client sending part of its headers, then silence, is answered 408 and disconnected within the headers timeout", async () => {
    const answer = await rawExchange(port, "GET /api/models HTTP/1.1\r\nHost: test\r\nX-Slow: 1\r\n", 10_000);
    expectContractError(answer, 408, "REQUEST_TIMEOUT");
    expect(answer.closedAfterMs).toBeGreaterThanOrEqual(HEADERS_TIMEOUT_MS - 50);
    expect(answer.closedAfterMs).toBeLessThan(HEADERS_TIMEOUT_MS + 2000);
  });

  it("http - a client that connects and sends nothing is disconnected too", async () => {
    const answer = await rawExchange(port, "", 10_000);
    expect(answer.closedAfterMs).toBeLessThan(HEADERS_TIMEOUT_MS + 2000);
  });

  it("http - a slow body (headers sent, body trickling) is cut at the request timeout", async () => {
    const answer = await rawExchange(
      port,
      'POST /api/auth/login HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"email":',
      10_000,
    );
    expectContractError(answer, 408, "REQUEST_TIMEOUT");
    expect(answer.closedAfterMs).toBeLessThan(1200 + 2000);
  });

  it("http - a streamed answer (SSE) lasting longer than the request timeout is not cut", async () => {
    ollama.script = { ...ollama.script, chunks: ["a", "b", "c", "d", "e", "f"], chunkDelayMs: 400 };
    try {
      const stream = await openSse(`${platform.baseUrl}/api/models/infer`, { token, body: { model: "llama3.2:1b", prompt: "slow", stream: true } });
      expect(stream.response.status).toBe(200);
      const started = Date.now();
      const events = await stream.rest();
      expect(Date.now() - started).toBeGreaterThan(1200);
      expect(events.at(-1)).toMatchObject({ done: true, response: "abcdef" });
    } finally {
      ollama.script = { ...ollama.script, chunks: ["Hello", ", ", "world", "!"], chunkDelayMs: 0 };
    }
  });

  it("http - a connection over GATEWAY_MAX_CONNECTIONS is refused with 503 JSON; once one closes, a new one is served", async () => {
    // fetch's pooled keep-alive connections count too: retry until they expired (keep-alive timeout 1 s) and all slots are ours.
    let held: net.Socket[] = [];
    const release = () => held.splice(0).forEach((s) => s.destroy());
    try {
      await waitFor(
        async () => {
          release();
          const opened = await Promise.all(Array.from({ length: MAX_CONNECTIONS }, () => heldConnection(port)));
          held = opened.map((o) => o.socket);
          return opened.every((o) => o.status === 404);
        },
        { timeoutMs: 10_000, intervalMs: 300, message: "our connections to fill the cap" },
      );
      const refused = await rawExchange(port, "GET /api/models HTTP/1.1\r\nHost: test\r\n\r\n");
      expectContractError(refused, 503, "SERVICE_UNAVAILABLE");
      expect(refused.headers["retry-after"]).toBe("1");

      held.shift()!.destroy();
      const served = await waitFor(
        async () => {
          const answer = await rawExchange(port, "GET /api/no-such-route HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
          return answer.status === 404 ? answer : false;
        },
        { timeoutMs: 5_000, message: "a freed slot to be usable" },
      );
      expect(served.body.error.code).toBe("NOT_FOUND");
    } finally {
      release();
    }
  });
});

describe("http - the gateway in its own process over NATS", () => {
  let platform: NatsPlatform | undefined;
  afterAll(() => platform?.stop());

  it("http - a 400 KB 0xFF login e-mail and oversized params never become a bus message that kills the gateway process", async () => {
    platform = await startNatsPlatform({ prefix: "gwsec", env: { JWT_SECRET: "shared-secret" }, processes: [["api-gateway"], ["auth"]] });
    const base = platform.baseUrl;
    const [gateway] = platform.children;
    const login = (email: string) => http(base, "POST", "/api/auth/login", { body: { email, password: "password-123" } });
    await platform.waitFor(async () => (await login("probe@example.com").catch(() => undefined))?.status === 401, {
      timeoutMs: 30_000,
      message: "login routed over NATS",
    });

    const ff = Buffer.concat([Buffer.from('{"email":"'), Buffer.alloc(400_000, 0xff), Buffer.from('","password":"password-123"}')]);
    const res = await fetch(`${base}/api/auth/login`, { method: "POST", headers: { "content-type": "application/json" }, body: ff });
    expect(res.status).toBe(400);
    // Valid UTF-8 that fits the 1 MiB body but not a bus message: 413 at the gateway.
    const big = await login(`${"é".repeat(500_000)}@example.com`);
    expect(big.status).toBe(413);

    expect(gateway.proc.exitCode).toBeNull();
    expect((await login("probe@example.com")).status).toBe(401);
    expect(gateway.proc.exitCode).toBeNull();
  });
});
