/**
 * Which fields of a request the platform knows (API-DECISIONS Part 3): a field it does not know
 * is refused by name, so that no client believes a control it sent was honoured when it was
 * dropped. Pure: used for every REST-facing action (middlewares/unknown-fields.middleware.ts) and
 * by the OpenAI-compatible API's parsers (services/inference/openai-api.ts).
 */
import { Kind } from "@sinclair/typebox";
import type { FieldError } from "./errors";

type Schema = Record<string, unknown>;

/** `parent.key`, `parent[0]`: the paths fastest-validator names fields by (`env.NAME`, `messages[0].content`). */
export const fieldPath = (parent: string, key: string | number) => (typeof key === "number" ? `${parent}[${key}]` : parent ? `${parent}.${key}` : key);

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

export const unknownField = (field: string): FieldError => ({ field, message: `The '${field}' field is not a known field of this request.` });

/** The fields of a flat body outside `known` (the /v1 parsers' lists). */
export function unknownFieldsOf(body: Record<string, unknown>, known: ReadonlySet<string>): FieldError[] {
  return Object.keys(body)
    .filter((key) => !known.has(key))
    .map((key) => unknownField(key));
}

/**
 * Fields of `value` a JSON Schema (TypeBox's) does not name, on every object schema that has
 * `properties` and does not say `additionalProperties` otherwise; `extra`: top-level names known
 * besides (the route's path params).
 */
export function unknownInJsonSchema(schema: Schema, value: unknown, extra: ReadonlySet<string> = new Set(), path = ""): FieldError[] {
  // An optional field that may also be null (`anyOf: [T, null]`): the member of the value's kind.
  if (Array.isArray(schema.anyOf)) {
    const kind = Array.isArray(value) ? "array" : isObject(value) ? "object" : undefined;
    const member = kind ? schema.anyOf.find((m): m is Schema => isObject(m) && m.type === kind) : undefined;
    return member ? unknownInJsonSchema(member, value, extra, path) : [];
  }
  if (Array.isArray(value)) {
    const items = schema.items;
    return isObject(items) ? value.flatMap((v, i) => unknownInJsonSchema(items, v, undefined, fieldPath(path, i))) : [];
  }
  const properties = schema.properties;
  if (!isObject(value) || !isObject(properties)) return [];
  const open = schema.additionalProperties !== undefined && schema.additionalProperties !== false;
  return Object.keys(value).flatMap((key) => {
    const sub = Object.prototype.hasOwnProperty.call(properties, key) ? properties[key] : undefined;
    if (sub === undefined) return open || extra.has(key) ? [] : [unknownField(fieldPath(path, key))];
    return isObject(sub) ? unknownInJsonSchema(sub, value[key], undefined, fieldPath(path, key)) : [];
  });
}

/** The fields an object rule lists (`props`), for objects and lists of them; none for any other rule. */
function propsOf(rule: unknown): Schema | undefined {
  if (!isObject(rule)) return undefined;
  if (rule.type === "array") return propsOf(rule.items);
  const props = rule.type === "object" ? (rule.props ?? rule.properties) : undefined;
  return isObject(props) ? props : undefined;
}

/**
 * Fields of `value` fastest-validator rules do not name: the top level, and nested objects whose
 * rule lists their `props` (an object rule without them, such as a job's `env`, takes any keys).
 */
export function unknownInRules(rules: Schema, value: unknown, extra: ReadonlySet<string> = new Set(), path = ""): FieldError[] {
  if (Array.isArray(value)) return value.flatMap((v, i) => unknownInRules(rules, v, undefined, fieldPath(path, i)));
  if (!isObject(value)) return [];
  return Object.keys(value).flatMap((key) => {
    // `$$strict`, `$$async`: the rules' options, never fields.
    const rule = key.startsWith("$$") || !Object.prototype.hasOwnProperty.call(rules, key) ? undefined : rules[key];
    if (rule === undefined) return extra.has(key) ? [] : [unknownField(fieldPath(path, key))];
    const props = propsOf(rule);
    return props ? unknownInRules(props, value[key], undefined, fieldPath(path, key)) : [];
  });
}

export type RestRoute = { method: string; path: string };

/** An action's `rest` as moleculer-web reads it: `"GET /jobs/:id"`, `{ method, path, basePath }`, or a list of them. */
export function restRoutesOf(rest: unknown): RestRoute[] {
  return ([] as unknown[]).concat(rest ?? []).flatMap((r): RestRoute[] => {
    if (typeof r === "string") {
      const [method, path] = r.includes(" ") ? r.trim().split(/\s+/) : ["*", r];
      return [{ method: method.toUpperCase(), path: path ?? "" }];
    }
    if (isObject(r)) return [{ method: String(r.method ?? "*").toUpperCase(), path: `${String(r.basePath ?? "")}${String(r.path ?? "")}` }];
    return r === true ? [{ method: "*", path: "" }] : [];
  });
}

/** The `:name` segments of the routes: moleculer-web merges them into params beside the body and the query string. */
export const pathParamsOf = (routes: RestRoute[]): Set<string> => new Set(routes.flatMap((r) => [...r.path.matchAll(/:([A-Za-z0-9_]+)/g)].map((m) => m[1])));

/**
 * Whether `params` is a JSON Schema (TypeBox's; or one that came over the bus, without TypeBox's
 * Symbol keys) rather than fastest-validator rules, whose top level names fields.
 */
export function isJsonSchemaParams(params: unknown): boolean {
  if (typeof params !== "object" || params === null) return false;
  const schema = params as Record<string | symbol, unknown>;
  return Kind in schema || (schema.type === "object" && isObject(schema.properties));
}

/** What finds the unknown fields in a REST-facing action's params; undefined for an action reached only over the bus. */
export function unknownFieldsFinder(action: { rest?: unknown; params?: unknown }): ((params: unknown) => FieldError[]) | undefined {
  if (!action.rest) return undefined;
  const known = pathParamsOf(restRoutesOf(action.rest));
  const schema = isObject(action.params) ? action.params : {};
  return isJsonSchemaParams(schema) ? (params) => unknownInJsonSchema(schema, params, known) : (params) => unknownInRules(schema, params, known);
}
