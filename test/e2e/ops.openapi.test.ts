/**
 * OpenAPI drift test, with every service of the platform running: the document at
 * /api/openapi.json lists exactly the routes the services declare and the gateway serves, each
 * with its documentation (its action's `openapi`, or the gateway's catalogue for its own routes:
 * success and error responses), and real responses match the schemas the document gives for
 * their status.
 */
import Ajv2020 from "ajv/dist/2020";
import addFormats from "ajv-formats";
import { randomUUID } from "crypto";
import type { ValidateFunction } from "ajv";
import { SERVICE_REGISTRY } from "../../moleculer.config";
import { V1_OPERATIONS } from "../../services/api-gateway/openapi/openai";
import { OPERATIONS } from "../../services/api-gateway/openapi/responses";
import { InferencePlatform, startInferencePlatform } from "../support/inference-platform";
import { v1Routes } from "../support/v1-routes";
import { http, HttpResult, startTestPlatform, TestPlatform, waitFor, waitForRoute } from "../support/platform";

type Doc = { openapi: string; paths: Record<string, Record<string, any>>; components: any };

// The gateway's own pages: the reference (docs.ts) and the web console (console.ts).
const DOCS_ROUTES = ["GET /", "GET /api/openapi.json", "GET /api/docs", "GET /api/docs/{file}", "GET /console", "GET /console/{file}"];
// The routes the gateway aliases under /v1 (api-gateway.service.ts), documented in their APIs' shapes (openapi/openai.ts).
const V1_ROUTES = v1Routes();
const toKey = (method: string, path: string) => `${method.toUpperCase()} ${path.replace(/:([A-Za-z0-9_]+)\??/g, "{$1}")}`;

/** The document `base` serves, and an ajv that knows it as `openapi.json`. */
async function servedDocument(base: string): Promise<{ doc: Doc; ajv: Ajv2020 }> {
  const res = await http<Doc>(base, "GET", "/api/openapi.json");
  if (res.status !== 200) throw new Error(`/api/openapi.json answered ${res.status}: ${res.text}`);
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats(ajv);
  ajv.addSchema(res.body, "openapi.json");
  return { doc: res.body, ajv };
}

describe("ops - OpenAPI document against the live routes", () => {
  let platform: TestPlatform;
  let doc: Doc;
  let ajv: Ajv2020;
  const validators = new Map<string, ValidateFunction>();

  /** Routes as the services declare them (settings.rest + each action's rest), read from the registry. */
  function declaredRoutes(): Set<string> {
    const keys = new Set<string>([...DOCS_ROUTES, ...V1_ROUTES]);
    const services = platform.broker.registry.getServiceList({ withActions: true }) as any[];
    for (const svc of services) {
      const base = svc.settings?.rest;
      if (typeof base !== "string") continue;
      for (const action of Object.values(svc.actions ?? {}) as any[]) {
        if (!action.rest || (action.visibility && action.visibility !== "published")) continue;
        for (const rest of [].concat(action.rest) as Array<string | { method: string; path: string; basePath?: string }>) {
          // "METHOD /path" under the service's base, or { method, path, basePath } under its own base
          const [method, path, own] = typeof rest === "string" ? [...rest.split(/\s+/), base] : [rest.method, rest.path, rest.basePath ?? base];
          keys.add(toKey(method, `/api${own}${path}`.replace(/\/+$/, "")));
        }
      }
    }
    return keys;
  }

  function documented(): Map<string, any> {
    const ops = new Map<string, any>();
    for (const [path, methods] of Object.entries(doc.paths)) for (const [m, op] of Object.entries(methods)) ops.set(`${m.toUpperCase()} ${path}`, op);
    return ops;
  }

  /** Checks a real response against the document: its status is listed, its body fits. */
  function expectDocumented(key: string, res: HttpResult): void {
    const [method, path] = key.split(" ");
    const op = doc.paths[path]?.[method.toLowerCase()];
    expect(op).toBeDefined();
    const response = op.responses[String(res.status)];
    if (!response) throw new Error(`${key} answered ${res.status}, which the document does not list (${Object.keys(op.responses)}): ${res.text}`);
    const type = (res.headers.get("content-type") ?? "").split(";")[0];
    const media = response.content?.[type];
    if (!media) throw new Error(`${key} ${res.status} answered ${type}, not documented`);
    if (type !== "application/json") return;
    const pointer = `openapi.json#/paths/${path.replace(/~/g, "~0").replace(/\//g, "~1")}/${method.toLowerCase()}/responses/${res.status}/content/application~1json/schema`;
    let validate = validators.get(pointer);
    if (!validate) {
      validate = ajv.compile({ $ref: pointer });
      validators.set(pointer, validate);
    }
    if (!validate(res.body)) throw new Error(`${key} ${res.status} body does not match the document: ${ajv.errorsText(validate.errors)}\n${res.text}`);
    expect(res.headers.get("x-request-id")).toBeTruthy();
  }

  beforeAll(async () => {
    platform = await startTestPlatform({ env: { OLLAMA_URL: "off", GPU_EXECUTOR: "process" } });
    for (const [method, path] of [
      ["POST", "/api/auth/login"],
      ["GET", "/api/gpu/status"],
      ["GET", "/api/models"],
      ["GET", "/api/databases"],
    ])
      await waitForRoute(platform.baseUrl, method, path);
    ({ doc, ajv } = await servedDocument(platform.baseUrl));
  });

  afterAll(() => platform?.stop());

  it("ops - every service of the registry is running", () => {
    const local = platform.broker.services.map((s) => s.name).sort();
    expect(local).toEqual(expect.arrayContaining(Object.keys(SERVICE_REGISTRY)));
  });

  it("ops - the document lists exactly the routes the services declare (none missing, none extra)", () => {
    const declared = declaredRoutes();
    const inDoc = new Set([
      ...documented().keys(),
      ...Object.entries(OPERATIONS)
        .filter(([, o]) => o.hidden)
        .map(([k]) => k),
    ]);
    expect([...inDoc].filter((k) => !declared.has(k)).sort()).toEqual([]);
    expect([...declared].filter((k) => !inDoc.has(k)).sort()).toEqual([]);
  });

  it("ops - every route has its catalogue entry, and no catalogue entry outlives its route", () => {
    const undocumented = [...documented()].filter(([, op]) => op["x-undocumented"]).map(([k]) => k);
    expect(undocumented).toEqual([]); // a new route: declare its `openapi` beside its `rest` (lib/contract.ts)
    const declared = declaredRoutes();
    expect(Object.keys({ ...OPERATIONS, ...V1_OPERATIONS }).filter((k) => !declared.has(k))).toEqual([]);
  });

  it("ops - every operation documents a success and its errors in the shared error shape", () => {
    expect(doc.openapi).toBe("3.1.0");
    for (const [key, op] of documented()) {
      const statuses = Object.keys(op.responses).map(Number);
      expect(statuses.some((s) => s >= 200 && s < 300)).toBe(true);
      const errors = statuses.filter((s) => s >= 400);
      expect(errors.length).toBeGreaterThan(0);
      // The /v1 routes answer OpenAI's error shape (/v1/messages Anthropic's), every other route the platform's.
      const shape = `#/components/schemas/${key.includes(" /v1/messages") ? "AnthropicError" : key.includes(" /v1/") ? "OpenAiError" : "Error"}`;
      for (const s of errors) expect(JSON.stringify(op.responses[s].content["application/json"].schema)).toContain(`${shape}"`);
      if (op.security.length > 0) expect(statuses).toContain(401);
      for (const p of op.parameters ?? []) if (p.in === "path") expect(key).toContain(`{${p.name}}`);
    }
    // Every schema in the document compiles.
    for (const name of Object.keys(doc.components.schemas)) ajv.getSchema(`openapi.json#/components/schemas/${name}`);
  });

  it("ops - every documented route is served: an anonymous request gets a documented answer", async () => {
    for (const key of documented().keys()) {
      const [method, path] = key.split(" ");
      const url = path.replace(/\{[^}]+\}/g, randomUUID());
      const res = await http(platform.baseUrl, method, url, method === "POST" ? { body: {} } : {});
      expect(`${key} → ${res.status} ${res.body?.error?.message ?? ""}`).not.toMatch(/Route not found/);
      if (res.headers.get("content-type")?.startsWith("application/json")) expectDocumented(key, res);
    }
    const unknown = await http(platform.baseUrl, "GET", "/api/no-such-route");
    expect(unknown.status).toBe(404);
  });

  it("ops - real responses of an account's journey match the documented schemas", async () => {
    const base = platform.baseUrl;
    const email = `openapi-${randomUUID()}@example.com`;
    const calls: Array<[string, HttpResult]> = [];
    const call = async (key: string, opts: Parameters<typeof http>[3] = {}, url?: string) => {
      const [method, path] = key.split(" ");
      const res = await http(base, method, url ?? path, opts);
      calls.push([key, res]);
      return res;
    };

    const reg = await call("POST /api/auth/register", { body: { email, name: "Doc Reader", password: "a long password" } });
    expect(reg.status).toBe(201);
    const token = reg.body.accessToken;
    expect((await call("POST /api/auth/register", { body: { email, name: "Again", password: "a long password" } })).status).toBe(409);
    expect((await call("POST /api/auth/register", { body: { email: "not-an-email", name: "", password: "short" } })).status).toBe(400);
    expect((await call("POST /api/auth/login", { rawBody: "{not json", headers: { "content-type": "application/json" } })).status).toBe(400);
    expect((await call("POST /api/auth/login", { rawBody: "email=a", headers: { "content-type": "text/plain" } })).status).toBe(415);
    expect((await call("POST /api/auth/login", { body: { email, password: "a long password" } })).status).toBe(200);
    expect((await call("GET /api/auth/me", { token })).status).toBe(200);
    const key = await call("POST /api/auth/api-keys", { token });
    expect(key.status).toBe(201);
    expect((await call("POST /api/auth/api-keys", { headers: { "x-api-key": key.body.apiKey } })).status).toBe(403);

    expect((await call("GET /api/gpu/status", { token })).status).toBe(200);
    expect((await call("POST /api/gpu/jobs", { token, body: { command: 42 } })).status).toBe(400);
    const job = await call("POST /api/gpu/jobs", { token, body: { command: "echo documented" } });
    expect(job.status).toBe(201);
    expect((await call("GET /api/gpu/jobs/{id}", { token }, `/api/gpu/jobs/${job.body.id}`)).status).toBe(200);
    expect((await call("GET /api/gpu/jobs", { token })).status).toBe(200);
    expect((await call("GET /api/gpu/jobs/{id}", { token }, `/api/gpu/jobs/${randomUUID()}`)).status).toBe(404);

    expect((await call("GET /api/models")).status).toBe(200);
    expect((await call("GET /api/models/health")).status).toBe(200);
    expect((await call("POST /api/models/infer", { token, body: { model: "no-such-model", prompt: "hi" } })).status).toBe(404);
    expect((await call("POST /api/models/infer", { token, body: { model: "m", prompt: "hi", temperature: 9 } })).status).toBe(400);

    const db = await call("POST /api/databases", { token });
    expect(db.status).toBe(201);
    expect((await call("GET /api/databases/{id}", { token }, `/api/databases/${db.body.id}`)).status).toBe(200);
    expect((await call("GET /api/databases", { token })).status).toBe(200);
    expect((await call("DELETE /api/databases/{id}", { token }, `/api/databases/${db.body.id}`)).status).toBe(200);
    expect((await call("DELETE /api/databases/{id}", { token }, `/api/databases/${db.body.id}`)).status).toBe(404);

    for (const [k, res] of calls) expectDocumented(k, res);
    // The job may still run on the simulated card: wait until it is done so nothing outlives the test.
    await waitFor(
      async () => {
        const res = await http(base, "GET", `/api/gpu/jobs/${job.body.id}`, { token });
        return ["completed", "failed", "cancelled"].includes(res.body.status);
      },
      { timeoutMs: 20_000, message: "job finished" },
    );
  });
});

describe("ops - OpenAPI document of the OpenAI-compatible routes (/v1)", () => {
  let p: InferencePlatform;
  let doc: Doc;
  let ajv: Ajv2020;

  /** Validates `body` against the schema the document gives `METHOD /path` for `status` (JSON). */
  function expectV1Documented(method: string, path: string, res: HttpResult): void {
    const op = doc.paths[path]?.[method.toLowerCase()];
    expect(op?.responses?.[String(res.status)]).toBeDefined();
    const pointer = `openapi.json#/paths/${path.replace(/\//g, "~1")}/${method.toLowerCase()}/responses/${res.status}/content/application~1json/schema`;
    const validate = ajv.getSchema(pointer) ?? ajv.compile({ $ref: pointer });
    if (!validate(res.body)) throw new Error(`${method} ${path} ${res.status} does not match the document: ${ajv.errorsText(validate.errors)}\n${res.text}`);
  }

  beforeAll(async () => {
    p = await startInferencePlatform();
    ({ doc, ajv } = await servedDocument(p.platform.baseUrl));
  });
  afterAll(() => p?.stop());

  it("ops - /v1/models, /v1/chat/completions, /v1/responses and /v1/embeddings are documented with OpenAI's request, response and error shapes, /v1/messages with Anthropic's", () => {
    const schemaOf = (path: string, method: string, status: string) => doc.paths[path][method].responses[status].content["application/json"].schema;
    expect(schemaOf("/v1/models", "get", "200")).toEqual({ $ref: "#/components/schemas/OpenAiModelList" });
    expect(schemaOf("/v1/chat/completions", "post", "200")).toEqual({ $ref: "#/components/schemas/OpenAiChatCompletion" });
    expect(doc.paths["/v1/chat/completions"].post.responses["200"].content["text/event-stream"]).toBeDefined();
    expect(schemaOf("/v1/embeddings", "post", "200")).toEqual({ $ref: "#/components/schemas/OpenAiEmbeddingList" });
    expect(doc.paths["/v1/chat/completions"].post.requestBody.content["application/json"].schema).toEqual({
      $ref: "#/components/schemas/OpenAiChatCompletionRequest",
    });
    expect(doc.paths["/v1/embeddings"].post.requestBody.content["application/json"].schema).toEqual({ $ref: "#/components/schemas/OpenAiEmbeddingsRequest" });
    for (const status of ["400", "401", "404", "429", "503"])
      expect(schemaOf("/v1/chat/completions", "post", status)).toEqual({ $ref: "#/components/schemas/OpenAiError" });
    expect(doc.components.schemas.OpenAiError.properties.error.required).toEqual(["message", "type", "param", "code"]);
    expect(schemaOf("/v1/responses", "post", "200")).toEqual({ $ref: "#/components/schemas/OpenAiResponse" });
    expect(schemaOf("/v1/messages", "post", "200")).toEqual({ $ref: "#/components/schemas/AnthropicMessage" });
    for (const status of ["400", "401", "404", "429", "529"])
      expect(schemaOf("/v1/messages", "post", status)).toEqual({ $ref: "#/components/schemas/AnthropicError" });
  });

  it("ops - real /v1 answers (success and errors) match the documented schemas", async () => {
    const base = p.platform.baseUrl;
    const key = { headers: { authorization: `Bearer ${p.apiKey}` } };
    const models = await http(base, "GET", "/v1/models", key);
    expect(models.status).toBe(200);
    expect(models.body.data.length).toBeGreaterThan(0);
    expectV1Documented("GET", "/v1/models", models);
    const chat = await http(base, "POST", "/v1/chat/completions", { ...key, body: { model: "llama3.2:1b", messages: [{ role: "user", content: "hi" }] } });
    expect(chat.status).toBe(200);
    expectV1Documented("POST", "/v1/chat/completions", chat);
    p.ollama.set({ chunks: [], toolCalls: [{ name: "get_weather", arguments: '{"city":"Oslo"}' }], completionTokens: 9 });
    const tools = [{ type: "function", function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } } }];
    const toolCall = await http(base, "POST", "/v1/chat/completions", {
      ...key,
      body: { model: "llama3.2:1b", messages: [{ role: "user", content: "hi" }], tools },
    });
    p.ollama.set({});
    expect(toolCall.status).toBe(200);
    expect(toolCall.body.choices[0]).toMatchObject({ finish_reason: "tool_calls", message: { tool_calls: [{ function: { name: "get_weather" } }] } });
    expectV1Documented("POST", "/v1/chat/completions", toolCall);
    const response = await http(base, "POST", "/v1/responses", { ...key, body: { model: "llama3.2:1b", input: "hi" } });
    expect(response.status).toBe(200);
    expectV1Documented("POST", "/v1/responses", response);
    const anthropicKey = { headers: { "x-api-key": p.apiKey } };
    const message = await http(base, "POST", "/v1/messages", {
      ...anthropicKey,
      body: { model: "llama3.2:1b", max_tokens: 64, messages: [{ role: "user", content: "hi" }] },
    });
    expect(message.status).toBe(200);
    expectV1Documented("POST", "/v1/messages", message);
    const badMessage = await http(base, "POST", "/v1/messages", { ...anthropicKey, body: { model: "llama3.2:1b", messages: [] } });
    expect([badMessage.status, badMessage.body.type]).toEqual([400, "error"]);
    expectV1Documented("POST", "/v1/messages", badMessage);
    const embeddings = await http(base, "POST", "/v1/embeddings", { ...key, body: { model: "llama3.2:1b", input: ["a", "b"] } });
    expect(embeddings.status).toBe(200);
    expectV1Documented("POST", "/v1/embeddings", embeddings);
    const invalid = await http(base, "POST", "/v1/chat/completions", { ...key, body: { model: "llama3.2:1b", messages: [], n: 3 } });
    expect(invalid.status).toBe(400);
    expectV1Documented("POST", "/v1/chat/completions", invalid);
    const unknown = await http(base, "POST", "/v1/embeddings", { ...key, body: { model: "no-such-model", input: "a" } });
    expect(unknown.status).toBe(404);
    expectV1Documented("POST", "/v1/embeddings", unknown);
    const anonymous = await http(base, "GET", "/v1/models");
    expect(anonymous.status).toBe(401);
    expectV1Documented("GET", "/v1/models", anonymous);
    // A body the document forbids is one the server refuses: the schema is not looser than the server.
    expect(ajv.validate("openapi.json#/components/schemas/OpenAiChatCompletionRequest", { model: "m", messages: [] })).toBe(false);
  });
});
