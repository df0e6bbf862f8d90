/** OpenAPI generation: fastest-validator rules → JSON Schema, and routes → operations. */
import { Type } from "../../lib/contract";
import { SERVICE_REGISTRY } from "../../moleculer.config";
import { buildOpenApi, LiveRoute, toOpenApiPath } from "../../services/api-gateway/openapi/generator";
import type { Operation } from "../../services/api-gateway/openapi/responses";
import { isRequired, paramsSchema, toJsonSchema } from "../../services/api-gateway/openapi/schema";

describe("ops - fastest-validator rules as JSON Schema", () => {
  const cases: Array<[string, unknown, Record<string, unknown>]> = [
    ["string with bounds", { type: "string", min: 8, max: 128 }, { type: "string", minLength: 8, maxLength: 128 }],
    ["non-empty string", { type: "string", empty: false }, { type: "string", minLength: 1 }],
    ["pattern from a RegExp", { type: "string", pattern: /^ci_[a-z]+$/ }, { type: "string", pattern: "^ci_[a-z]+$" }],
    ["email", { type: "email", max: 254 }, { type: "string", format: "email", maxLength: 254 }],
    ["uuid", { type: "uuid" }, { type: "string", format: "uuid" }],
    ["url", "url", { type: "string", format: "uri" }],
    [
      "integer with range and default",
      { type: "number", integer: true, min: 1, max: 8192, default: 1024 },
      { type: "integer", minimum: 1, maximum: 8192, default: 1024 },
    ],
    ["number", { type: "number", min: 0, max: 2 }, { type: "number", minimum: 0, maximum: 2 }],
    ["positive number", { type: "number", positive: true }, { type: "number", exclusiveMinimum: 0 }],
    ["boolean shorthand", "boolean|optional", { type: "boolean" }],
    ["string shorthand with options", "string|min:3|max:9", { type: "string", minLength: 3, maxLength: 9 }],
    ["enum", { type: "enum", values: ["a", "b"] }, { enum: ["a", "b"] }],
    ["nullable string", { type: "string", nullable: true }, { type: ["string", "null"] }],
    ["array of strings", { type: "array", items: "string", max: 3 }, { type: "array", items: { type: "string" }, maxItems: 3 }],
    ["alternatives", [{ type: "string" }, { type: "number" }], { oneOf: [{ type: "string" }, { type: "number" }] }],
    ["any", { type: "any" }, {}],
    [
      "nested object, strict",
      { type: "object", strict: true, props: { a: "string", b: { type: "number", optional: true } } },
      { type: "object", properties: { a: { type: "string" }, b: { type: "number" } }, required: ["a"], additionalProperties: false },
    ],
  ];
  it.each(cases)("ops - %s", (_name, rule, expected) => {
    expect(toJsonSchema(rule)).toEqual(expected);
  });

  const required: Array<[string, unknown, boolean]> = [
    ["plain rule", { type: "string" }, true],
    ["optional", { type: "string", optional: true }, false],
    ["with a default", { type: "number", default: 1 }, false],
    ["optional shorthand", "string|optional", false],
  ];
  it.each(required)("ops - required: %s", (_name, rule, expected) => {
    expect(isRequired(rule)).toBe(expected);
  });

  it("ops - action params: $$ options skipped, strict remove allows unknown fields", () => {
    expect(paramsSchema({ $$strict: "remove", email: "email", name: { type: "string", optional: true } })).toEqual({
      type: "object",
      properties: { email: { type: "string", format: "email" }, name: { type: "string" } },
      required: ["email"],
    });
  });
});

describe("ops - routes as OpenAPI operations", () => {
  // Actions document their routes (`openapi`); the catalogue holds the gateway's own handlers.
  const catalogue: Record<string, Operation> = {
    "GET /api/assets/{file}": { tag: "t", summary: "assets", status: 200, response: {}, hidden: true },
  };
  const Thing = Type.Object({ name: Type.String() }, { $id: "Thing" });
  const routes: LiveRoute[] = [
    {
      method: "POST",
      path: "/api/things",
      action: {
        name: "things.create",
        rest: "POST /",
        params: { $$strict: "remove", name: { type: "string", min: 1 }, size: { type: "number", optional: true } },
        openapi: { tag: "t", summary: "Create a thing", status: 201, response: Thing, errors: ["QUOTA_EXCEEDED"] },
      },
    },
    {
      method: "GET",
      path: "/api/things/:id",
      action: {
        name: "things.get",
        rest: "GET /:id",
        params: { id: "uuid", verbose: { type: "boolean", optional: true, convert: true } },
        openapi: { tag: "t", summary: "One thing", status: 200, response: Thing, errors: ["NOT_FOUND"] },
      },
    },
    {
      method: "POST",
      path: "/api/things/keys",
      action: {
        name: "things.key",
        rest: "POST /keys",
        auth: "jwt",
        params: { $$strict: "remove" },
        openapi: { tag: "t", summary: "A key", status: 201, response: { type: "object" } },
      },
    },
    {
      method: "GET",
      path: "/api/public",
      action: {
        name: "things.public",
        rest: "GET /public",
        auth: "public",
        openapi: { tag: "t", summary: "Public", status: 200, response: Type.String(), contentType: "text/plain" },
      },
    },
    {
      method: "POST",
      path: "/api/things/:id/labels",
      action: {
        name: "things.label",
        rest: "POST /:id/labels",
        params: Type.Object({
          id: Type.String({ format: "uuid" }),
          labels: Type.Array(Type.Object({ key: Type.String(), value: Type.String() })),
          note: Type.String({ default: "" }),
        }),
        openapi: { tag: "t", summary: "Label a thing", status: 200, response: Thing },
      },
    },
    {
      method: "GET",
      path: "/api/things/:id/labels",
      action: {
        name: "things.labels",
        rest: "GET /:id/labels",
        params: Type.Object({ id: Type.String(), limit: Type.Optional(Type.Integer({ minimum: 1 })) }),
        openapi: { tag: "t", summary: "A thing's labels", status: 200, response: Thing },
      },
    },
    { method: "GET", path: "/api/new", action: { name: "things.brandNew", rest: "GET /new" } },
    { method: "GET", path: "/api/assets/:file" },
  ];
  const doc = buildOpenApi(routes, { version: "1.2.3", catalogue });
  const op = (method: string, path: string) => doc.paths[path]?.[method];

  it("ops - path params become {name} path parameters with their rule's schema; the rest is query", () => {
    expect(toOpenApiPath("/api/gpu/jobs/:id/logs")).toBe("/api/gpu/jobs/{id}/logs");
    expect(op("get", "/api/things/{id}").parameters).toEqual([
      { name: "id", in: "path", required: true, schema: { type: "string", format: "uuid" } },
      { name: "verbose", in: "query", required: false, schema: { type: "boolean" } },
    ]);
  });

  it("ops - a body route gets a JSON request body; one without fields gets none", () => {
    expect(op("post", "/api/things").requestBody).toEqual({
      required: true,
      content: {
        "application/json": {
          schema: {
            type: "object",
            properties: { name: { type: "string", minLength: 1 }, size: { type: "number" } },
            required: ["name"],
            additionalProperties: false,
          },
        },
      },
    });
    expect(op("post", "/api/things/keys").requestBody).toBeUndefined();
  });

  it("ops - TypeBox params are published as they are: path, body (objects closed, a default optional) and query", () => {
    expect(op("post", "/api/things/{id}/labels").parameters).toEqual([{ name: "id", in: "path", required: true, schema: { type: "string", format: "uuid" } }]);
    expect(op("post", "/api/things/{id}/labels").requestBody).toEqual({
      required: true,
      content: {
        "application/json": {
          schema: {
            type: "object",
            properties: {
              labels: {
                type: "array",
                items: {
                  type: "object",
                  properties: { key: { type: "string" }, value: { type: "string" } },
                  required: ["key", "value"],
                  additionalProperties: false,
                },
              },
              note: { type: "string", default: "" },
            },
            required: ["labels"],
            additionalProperties: false,
          },
        },
      },
    });
    expect(op("get", "/api/things/{id}/labels").parameters).toEqual([
      { name: "id", in: "path", required: true, schema: { type: "string" } },
      { name: "limit", in: "query", required: false, schema: { type: "integer", minimum: 1 } },
    ]);
    expect(JSON.stringify(doc)).not.toContain("TypeBox");
  });

  const security: Array<[string, string, string, unknown]> = [
    ["required (the default for a REST action)", "post", "/api/things", [{ bearerAuth: [] }, { apiKey: [] }]],
    ["jwt only", "post", "/api/things/keys", [{ bearerAuth: [] }]],
    ["public", "get", "/api/public", []],
  ];
  it.each(security)("ops - security: %s", (_name, method, path, expected) => {
    expect(op(method, path).security).toEqual(expected);
  });

  const statuses: Array<[string, string, string, string[]]> = [
    ["create: body errors, auth, catalogue errors", "post", "/api/things", ["201", "400", "401", "403", "413", "415", "500", "503"]],
    ["get by id: validation, auth, not found", "get", "/api/things/{id}", ["200", "400", "401", "404", "500", "503"]],
    ["jwt-only without fields: 403 for API keys, 400 for a bad body", "post", "/api/things/keys", ["201", "400", "401", "403", "413", "415", "500", "503"]],
    ["public without params: 400 only for an unknown field, no 401", "get", "/api/public", ["200", "400", "500", "503"]],
  ];
  it.each(statuses)("ops - responses: %s", (_name, method, path, expected) => {
    expect(Object.keys(op(method, path).responses)).toEqual(expected);
  });

  it("ops - errors of one status share a response listing their codes in the shared schema", () => {
    const forbidden = op("post", "/api/things").responses["403"] as any;
    expect(forbidden.description).toBe("QUOTA_EXCEEDED");
    const bad = op("post", "/api/things").responses["400"] as any;
    expect(bad.content["application/json"].schema.allOf[0]).toEqual({ $ref: "#/components/schemas/Error" });
    expect(bad.content["application/json"].schema.allOf[1].properties.error.properties.code.enum).toEqual(["VALIDATION_FAILED", "INVALID_JSON"]);
    expect((op("get", "/api/public").responses["200"] as any).content).toEqual({ "text/plain": { schema: { type: "string" } } });
  });

  it("ops - a live route missing from the catalogue is flagged, a hidden one left out", () => {
    expect(op("get", "/api/new")["x-undocumented"]).toBe(true);
    expect(op("get", "/api/new").responses.default).toBeDefined();
    expect(doc.paths["/api/assets/{file}"]).toBeUndefined();
    expect(op("post", "/api/things")["x-undocumented"]).toBeUndefined();
    expect(op("post", "/api/things").operationId).toBe("things.create");
  });

  it("ops - the document is OpenAPI 3.1 with both security schemes", () => {
    expect(doc.openapi).toBe("3.1.0");
    expect((doc.info as { version: string }).version).toBe("1.2.3");
    expect(Object.keys((doc.components as any).securitySchemes)).toEqual(["bearerAuth", "apiKey"]);
    expect((doc.components as any).securitySchemes.apiKey).toMatchObject({ type: "apiKey", in: "header", name: "X-API-Key" });
  });
});

describe("ops - response contracts declared on the actions", () => {
  const Item = Type.Object({ id: Type.String({ format: "uuid" }) }, { $id: "Item" });
  const Box = Type.Object({ items: Type.Array(Item), note: Type.Optional(Type.String()) }, { $id: "Box" });
  const routes: LiveRoute[] = [
    { method: "GET", path: "/api/box", action: { name: "box.get", rest: "GET /", openapi: { tag: "t", summary: "A box", status: 200, response: Box } } },
  ];
  const doc = buildOpenApi(routes, { version: "1", catalogue: {} });

  it("ops - a schema with $id is published once in components.schemas and referenced, nested ones too", () => {
    expect((doc.paths["/api/box"].get.responses["200"] as any).content).toEqual({ "application/json": { schema: { $ref: "#/components/schemas/Box" } } });
    expect((doc.components as any).schemas.Box).toEqual({
      type: "object",
      required: ["items"],
      properties: { items: { type: "array", items: { $ref: "#/components/schemas/Item" } }, note: { type: "string" } },
    });
    expect((doc.components as any).schemas.Item).toEqual({ type: "object", required: ["id"], properties: { id: { type: "string", format: "uuid" } } });
    expect(Object.keys((doc.components as any).schemas).sort()).toEqual(["Box", "Error", "FieldError", "Item"]);
  });

  it("ops - the same document whether an action's contract comes in-process (TypeBox) or over the bus (JSON)", () => {
    const overTheBus = JSON.parse(JSON.stringify(routes)) as LiveRoute[];
    expect(buildOpenApi(overTheBus, { version: "1", catalogue: {} })).toEqual(doc);
    // No Symbol key (TypeBox's Kind) is left in the document: toEqual compares them too.
    expect(JSON.parse(JSON.stringify(doc))).toEqual(doc);
  });

  it("ops - every REST action of every service documents its route, and every $ref resolves", () => {
    const live: LiveRoute[] = [];
    for (const load of Object.values(SERVICE_REGISTRY)) {
      const schema = load();
      const base = schema.settings?.rest;
      for (const [name, action] of Object.entries(schema.actions ?? {}) as Array<[string, any]>) {
        if (typeof base !== "string" || !action.rest) continue;
        const [method, path] = String(action.rest).split(/\s+/);
        live.push({ method, path: `/api${base}${path}`.replace(/\/+$/, ""), action: { ...action, name: `${schema.name}.${name}` } });
      }
    }
    expect(live.length).toBeGreaterThan(10);
    const served = buildOpenApi(live, { version: "1" });
    const undocumented = Object.entries(served.paths).flatMap(([path, ops]) =>
      Object.entries(ops)
        .filter(([, op]) => op["x-undocumented"])
        .map(([m]) => `${m} ${path}`),
    );
    expect(undocumented).toEqual([]); // a new route: declare its `openapi` beside its `rest` (lib/contract.ts)
    const refs = [...JSON.stringify(served).matchAll(/"#\/components\/schemas\/([^"]+)"/g)].map((m) => m[1]);
    expect(refs.filter((name) => !(name in (served.components as any).schemas))).toEqual([]);
    // A gateway in another process reads the actions as JSON from the registry: nothing (a RegExp pattern, a Symbol) may be lost on the way.
    expect(buildOpenApi(JSON.parse(JSON.stringify(live)) as LiveRoute[], { version: "1" })).toEqual(served);
  });
});
