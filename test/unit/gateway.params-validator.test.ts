/**
 * The params validator and the unknown-fields middleware on an in-process broker (no network):
 * TypeBox params and fastest-validator rules side by side, defaults and the conversion of
 * query-string values, unknown fields refused on REST-facing actions and tolerated on bus-only
 * ones, and the errors as the gateway answers them.
 */
import { ServiceBroker, type ServiceSchema } from "moleculer";
import { Type } from "../../lib/contract";
import { isJsonSchemaParams, pathParamsOf, restRoutesOf, unknownInJsonSchema, unknownInRules } from "../../lib/known-fields";
import { ParamsValidator } from "../../lib/params-validator";
import { UnknownFieldsMiddleware } from "../../middlewares/unknown-fields.middleware";
import { toPublicError } from "../../services/api-gateway/error-mapper";

const echo = (ctx: { params: unknown }) => ctx.params;

const Things: ServiceSchema = {
  name: "things",
  actions: {
    create: {
      rest: "POST /things",
      params: Type.Object({
        command: Type.String({ minLength: 1 }),
        timeoutSeconds: Type.Optional(Type.Integer({ minimum: 1, maximum: 100 })),
        priority: Type.String({ default: "normal" }),
        env: Type.Optional(Type.Record(Type.String(), Type.String())),
        messages: Type.Optional(Type.Array(Type.Object({ content: Type.String() }))),
      }),
      handler: echo,
    },
    logs: {
      rest: "GET /things/:id/logs",
      params: Type.Object({
        id: Type.String(),
        attempt: Type.Optional(Type.Integer({ minimum: 1 })),
        follow: Type.Optional(Type.Boolean()),
      }),
      handler: echo,
    },
    rename: { rest: { method: "POST", path: "/things/:id/rename" }, params: Type.Object({ name: Type.String() }), handler: echo },
    list: { rest: "GET /things", handler: echo },
    choose: {
      rest: "POST /things/choose",
      params: Type.Object({
        size: Type.Optional(Type.Union([Type.Integer({ maximum: 10 }), Type.Null()])),
        color: Type.Optional(Type.Union([Type.Literal("red"), Type.Literal("blue"), Type.Null()])),
        image: Type.Optional(Type.String({ pattern: "^[a-z]+$" })),
      }),
      handler: echo,
    },
    legacyCreate: {
      rest: "POST /legacy",
      params: { $$strict: "remove", name: { type: "string", min: 1 }, size: { type: "number", optional: true } },
      handler: echo,
    },
    legacyGet: {
      rest: "GET /legacy/:id",
      params: { id: "string", limit: { type: "number", integer: true, optional: true, convert: true } },
      handler: echo,
    },
    legacyStrict: { rest: "PUT /legacy/:id", params: { $$strict: true, id: "string", credits: { type: "number", optional: true } }, handler: echo },
    internal: { params: Type.Object({ id: Type.String(), n: Type.Integer({ default: 3 }) }), handler: echo },
    internalLegacy: { params: { $$strict: "remove", id: "string" }, handler: echo },
    internalBare: { handler: echo },
  },
};

/** What the gateway would answer for an error, or the action's answer. */
async function call(action: string, params: Record<string, unknown>): Promise<{ ok: unknown } | { status: number; body: unknown }> {
  try {
    return { ok: await broker.call(`things.${action}`, params) };
  } catch (err) {
    const pub = toPublicError(err, "req-1");
    return { status: pub.status, body: pub.body };
  }
}
const refused = (...details: Array<{ field: string; message: unknown }>) => ({
  status: 400,
  body: { error: { code: "VALIDATION_FAILED", message: "Request validation failed", details } },
});
const unknown = (field: string) => ({ field, message: `The '${field}' field is not a known field of this request.` });

let broker: ServiceBroker;
beforeAll(async () => {
  broker = new ServiceBroker({ logger: false, validator: new ParamsValidator(), middlewares: [UnknownFieldsMiddleware] });
  broker.createService(Things);
  await broker.start();
});
afterAll(() => broker.stop());

describe("params validator - TypeBox params", () => {
  it.each([
    ["valid params pass, the schema's defaults filled in", "create", { command: "nvidia-smi" }, { ok: { command: "nvidia-smi", priority: "normal" } }],
    [
      "a missing field and a wrong type, each named",
      "create",
      { timeoutSeconds: 1000 },
      refused(
        { field: "command", message: "The 'command' field is required." },
        { field: "timeoutSeconds", message: "The 'timeoutSeconds' field is invalid: expected integer to be less or equal to 100." },
      ),
    ],
    [
      "nested fields by path, as fastest-validator names them",
      "create",
      { command: "x", env: { NAME: 1 }, messages: [{ content: 2 }] },
      refused(
        { field: "env.NAME", message: expect.stringMatching(/^The 'env\.NAME' field is invalid: expected string/) },
        {
          field: "messages[0].content",
          message: expect.stringMatching(/^The 'messages\[0\]\.content' field is invalid/),
        },
      ),
    ],
    [
      "a JSON body keeps its types: a number as a string is refused",
      "create",
      { command: "x", timeoutSeconds: "5" },
      refused(expect.objectContaining({ field: "timeoutSeconds" })),
    ],
    [
      "query-string values become the integers and booleans the schema wants",
      "logs",
      { id: "j1", attempt: "2", follow: "true" },
      { ok: { id: "j1", attempt: 2, follow: true } },
    ],
    ["a query-string value that is no number stays refused", "logs", { id: "j1", attempt: "two" }, refused(expect.objectContaining({ field: "attempt" }))],
    [
      "an optional field that may be null fails as its own type; a choice of constants names them; a pattern is named as such",
      "choose",
      { size: 11, color: "green", image: "Bad" },
      refused(
        { field: "size", message: "The 'size' field is invalid: expected integer to be less or equal to 10." },
        { field: "color", message: 'The \'color\' field must be one of "red", "blue".' },
        { field: "image", message: "The 'image' field fails to match the required pattern." },
      ),
    ],
    ["null is taken for an optional field that may be null", "choose", { size: null, color: null }, { ok: { size: null, color: null } }],
    ["a bus-only action converts nothing and applies defaults", "internal", { id: "a", extra: 1 }, { ok: { id: "a", extra: 1, n: 3 } }],
  ])("params validator - %s", async (_name, action, params, expected) => {
    expect(await call(action, params)).toEqual(expected);
  });
});

describe("params validator - fastest-validator rules, as before", () => {
  it.each([
    ["valid params pass", "legacyCreate", { name: "a", size: 2 }, { ok: { name: "a", size: 2 } }],
    [
      "its messages, by field",
      "legacyCreate",
      { name: "" },
      refused({ field: "name", message: "The 'name' field length must be greater than or equal to 1 characters long." }),
    ],
    ["convert: true still converts a query-string number", "legacyGet", { id: "x", limit: "10" }, { ok: { id: "x", limit: 10 } }],
    ["a bus-only action still drops unknown fields ($$strict: remove)", "internalLegacy", { id: "a", extra: 1 }, { ok: { id: "a" } }],
    ["a bus-only action without params takes anything", "internalBare", { anything: 1 }, { ok: { anything: 1 } }],
  ])("params validator - %s", async (_name, action, params, expected) => {
    expect(await call(action, params)).toEqual(expected);
  });
});

describe("params validator - unknown fields on REST-facing actions", () => {
  it.each([
    ["TypeBox: a top-level field", "create", { command: "x", dependsOn: ["j0"] }, refused(unknown("dependsOn"))],
    ["TypeBox: a field in a listed object", "create", { command: "x", messages: [{ content: "a", name: "n" }] }, refused(unknown("messages[0].name"))],
    [
      "TypeBox: the schema's own faults are answered first (before the caller is checked, as today)",
      "create",
      { preemptible: true },
      refused(expect.objectContaining({ field: "command" })),
    ],
    [
      "TypeBox: a record's keys are data, not fields",
      "create",
      { command: "x", env: { ANY_NAME: "v" } },
      { ok: expect.objectContaining({ env: { ANY_NAME: "v" } }) },
    ],
    ["TypeBox: a path param is known though the schema does not name it", "rename", { id: "t1", name: "n" }, { ok: { id: "t1", name: "n" } }],
    ["TypeBox: an unknown query param", "logs", { id: "j1", tail: "5" }, refused(unknown("tail"))],
    ["fastest-validator with $$strict: remove", "legacyCreate", { name: "a", arrayCount: 3 }, refused(unknown("arrayCount"))],
    ["fastest-validator with $$strict: true names the field, not its parent", "legacyStrict", { id: "a", credit: 1 }, refused(unknown("credit"))],
    ["a rule option is not a field", "legacyCreate", { name: "a", $$strict: false }, refused(unknown("$$strict"))],
    ["no params at all: every field is unknown", "list", { page: "2" }, refused(unknown("page"))],
    ["no params at all: none sent is fine", "list", {}, { ok: {} }],
  ])("params validator - %s", async (_name, action, params, expected) => {
    expect(await call(action, params)).toEqual(expected);
  });
});

describe("params validator - the pure parts", () => {
  it.each([
    ["a string route", "GET /jobs/:id/logs", [{ method: "GET", path: "/jobs/:id/logs" }], ["id"]],
    ["an object route with its own base", { method: "GET", basePath: "/snapshots", path: "/:id" }, [{ method: "GET", path: "/snapshots/:id" }], ["id"]],
    [
      "a list of routes",
      ["POST /nodes/:nodeId/drain", "GET /"],
      [
        { method: "POST", path: "/nodes/:nodeId/drain" },
        { method: "GET", path: "/" },
      ],
      ["nodeId"],
    ],
    ["a path without a method", "/x/:a/:b", [{ method: "*", path: "/x/:a/:b" }], ["a", "b"]],
  ])("known fields - routes: %s", (_name, rest, routes, params) => {
    expect(restRoutesOf(rest)).toEqual(routes);
    expect([...pathParamsOf(restRoutesOf(rest))]).toEqual(params);
  });

  it("known fields - a schema's own additionalProperties decides; nested objects without properties take any keys", () => {
    const open = { type: "object", properties: { a: { type: "object" } }, additionalProperties: true };
    expect(unknownInJsonSchema(open, { a: { x: 1 }, b: 1 })).toEqual([]);
    const closed = { type: "object", properties: { a: { type: "object", properties: { b: {} } } } };
    expect(unknownInJsonSchema(closed, { a: { b: 1, c: 2 } }).map((e) => e.field)).toEqual(["a.c"]);
    // An optional field that may be null (a union with null): its object or list member is followed.
    const orNull = { type: "object", properties: { l: { anyOf: [{ type: "array", items: closed.properties.a }, { type: "null" }] } } };
    expect(unknownInJsonSchema(orNull, { l: [{ b: 1 }, { z: 1 }] }).map((e) => e.field)).toEqual(["l[1].z"]);
    expect(unknownInJsonSchema(orNull, { l: null })).toEqual([]);
    const rules = {
      env: { type: "object" },
      o: { type: "object", props: { k: "string" } },
      l: { type: "array", items: { type: "object", props: { k: "string" } } },
    };
    expect(unknownInRules(rules, { env: { X: 1 }, o: { k: "", z: 1 }, l: [{ k: "" }, { y: 1 }] }).map((e) => e.field)).toEqual(["o.z", "l[1].y"]);
  });

  it("params validator - TypeBox params are told from fastest-validator rules, also as JSON from the bus", () => {
    const schema = Type.Object({ a: Type.String() });
    expect([isJsonSchemaParams(schema), isJsonSchemaParams(JSON.parse(JSON.stringify(schema)))]).toEqual([true, true]);
    expect(isJsonSchemaParams({ $$strict: "remove", type: "string", name: "string" })).toBe(false);
  });

  it("params validator - a REST-facing schema's own additionalProperties: false leaves unknown fields to the middleware (after the caller is checked)", () => {
    const schema = Type.Object({ a: Type.String() }, { additionalProperties: false });
    const validator = new ParamsValidator();
    expect(validator.checkOf({ rest: "POST /x", params: schema } as never)!({ a: "x", b: 1 })).toBe(true);
    expect(validator.checkOf({ rest: "POST /x", params: schema } as never)!({ b: 1 })).toEqual([expect.objectContaining({ field: "a" })]);
    expect(validator.checkOf({ params: schema } as never)!({ a: "x", b: 1 })).toEqual([
      { field: "b", message: "The 'b' field is not a known field of this request." },
    ]);
  });

  it("params validator - validate() throws the same ValidationError", () => {
    const validator = new ParamsValidator();
    expect(validator.validate({ a: "x" }, Type.Object({ a: Type.String() }))).toBe(true);
    expect(() => validator.validate({}, { a: "string" })).toThrow(expect.objectContaining({ name: "ValidationError", type: "VALIDATION_ERROR" }));
  });
});
