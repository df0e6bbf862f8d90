/**
 * An action's `params` → JSON Schema 2020-12, as OpenAPI 3.1 uses it: fastest-validator rules
 * converted, TypeBox params as they are (they are JSON Schema already). The document is generated
 * from the rules the services actually enforce (lib/params-validator.ts), so it cannot say a field
 * is optional while validation requires it, nor leave out that unknown fields are refused.
 */
import Validator from "fastest-validator";
import { isJsonSchemaParams } from "../../../lib/known-fields";

export type JsonSchema = Record<string, unknown>;
type Rule = Record<string, unknown> & { type?: string };

// parseShortHand exists at runtime but is missing from the package's types.
const parser = new Validator() as unknown as { parseShortHand(rule: string): Record<string, unknown> };

/** Shorthand (`"string|min:3"`), arrays of alternatives and objects, all as rule objects. */
export function normalizeRule(raw: unknown): Rule | Rule[] {
  if (typeof raw === "string") return parser.parseShortHand(raw) as Rule;
  if (Array.isArray(raw)) return raw.map((r) => normalizeRule(r) as Rule);
  if (raw && typeof raw === "object") return raw as Rule;
  return { type: "any" };
}

export function isRequired(raw: unknown): boolean {
  const rule = normalizeRule(raw);
  if (Array.isArray(rule)) return rule.every((r) => isRequired(r));
  return rule.optional !== true && rule.default === undefined && rule.type !== "forbidden";
}

const source = (pattern: unknown) => (pattern instanceof RegExp ? pattern.source : String(pattern));

function numberSchema(rule: Rule): JsonSchema {
  const s: JsonSchema = { type: rule.integer ? "integer" : "number" };
  if (typeof rule.min === "number") s.minimum = rule.min;
  if (typeof rule.max === "number") s.maximum = rule.max;
  if (typeof rule.equal === "number") s.const = rule.equal;
  if (rule.positive) s.exclusiveMinimum = 0;
  if (rule.negative) s.exclusiveMaximum = 0;
  return s;
}

function stringSchema(rule: Rule, format?: string): JsonSchema {
  const s: JsonSchema = { type: "string" };
  if (format) s.format = format;
  if (typeof rule.min === "number") s.minLength = rule.min;
  if (typeof rule.max === "number") s.maxLength = rule.max;
  if (typeof rule.length === "number") s.minLength = s.maxLength = rule.length;
  if (rule.empty === false && s.minLength === undefined) s.minLength = 1;
  if (rule.pattern) s.pattern = source(rule.pattern);
  if (Array.isArray(rule.enum)) s.enum = rule.enum;
  return s;
}

function objectSchema(props: Record<string, unknown> | undefined, strict: unknown): JsonSchema {
  const s: JsonSchema = { type: "object" };
  if (!props) return s;
  const properties: Record<string, JsonSchema> = {};
  const required: string[] = [];
  for (const [name, raw] of Object.entries(props)) {
    if (name.startsWith("$$")) continue; // $$strict, $$async, ...: options, not fields
    const rule = normalizeRule(raw);
    if (!Array.isArray(rule) && rule.type === "forbidden") continue;
    properties[name] = toJsonSchema(raw);
    if (isRequired(raw)) required.push(name);
  }
  s.properties = properties;
  if (required.length) s.required = required;
  // "remove" silently drops unknown fields, so they are allowed; true refuses them.
  if (strict === true) s.additionalProperties = false;
  return s;
}

function base(rule: Rule): JsonSchema {
  switch (rule.type) {
    case "string":
      return stringSchema(rule);
    case "email":
      return stringSchema(rule, "email");
    case "url":
      return stringSchema(rule, "uri");
    case "uuid":
      return stringSchema(rule, "uuid");
    case "date":
      return { type: "string", format: "date-time" };
    case "number":
      return numberSchema(rule);
    case "boolean":
      return { type: "boolean" };
    case "enum":
      return { enum: rule.values as unknown[] };
    case "equal":
      return { const: rule.value };
    case "array": {
      const s: JsonSchema = { type: "array" };
      if (rule.items !== undefined) s.items = toJsonSchema(rule.items);
      if (typeof rule.min === "number") s.minItems = rule.min;
      if (typeof rule.max === "number") s.maxItems = rule.max;
      if (typeof rule.length === "number") s.minItems = s.maxItems = rule.length;
      return s;
    }
    case "object":
      return objectSchema((rule.props ?? rule.properties) as Record<string, unknown> | undefined, rule.strict);
    case "multi":
      return { oneOf: (rule.rules as unknown[]).map(toJsonSchema) };
    default:
      return {}; // any, custom, ...: nothing a schema can say
  }
}

export function toJsonSchema(raw: unknown): JsonSchema {
  const rule = normalizeRule(raw);
  if (Array.isArray(rule)) return { oneOf: rule.map(toJsonSchema) };
  const s = base(rule);
  if (rule.default !== undefined && typeof rule.default !== "function") s.default = rule.default;
  if (rule.nullable === true) {
    if (typeof s.type === "string") s.type = [s.type, "null"];
    else if (Array.isArray(s.enum)) s.enum = [...s.enum, null];
  }
  if (typeof rule.description === "string") s.description = rule.description;
  return s;
}

/** An action's `params` as one object schema (the top level is always an object). */
export function paramsSchema(params: Record<string, unknown> | undefined): JsonSchema {
  return objectSchema(params ?? {}, params?.$$strict);
}

export type ParamField = { name: string; schema: JsonSchema; required: boolean };

/** An action's fields, from fastest-validator rules or a JSON Schema (TypeBox's; a field with a default is optional, as validation fills it in). */
export function paramFields(params: Record<string, unknown> | undefined): ParamField[] {
  if (!params) return [];
  if (isJsonSchemaParams(params)) {
    const required = new Set((params.required ?? []) as string[]);
    // A plain copy: TypeBox's Symbol keys exist in-process only.
    return Object.entries(JSON.parse(JSON.stringify(params.properties)) as Record<string, JsonSchema>).map(([name, schema]) => ({
      name,
      schema,
      required: required.has(name) && schema.default === undefined,
    }));
  }
  return Object.entries(params)
    .filter(([name, raw]) => !name.startsWith("$$") && (Array.isArray(normalizeRule(raw)) || (normalizeRule(raw) as Rule).type !== "forbidden"))
    .map(([name, raw]) => ({ name, schema: toJsonSchema(raw), required: isRequired(raw) }));
}

/** Every object that lists its properties, without its own say on others, refuses them: as a REST-facing action does (middlewares/unknown-fields.middleware.ts). */
function closed(schema: JsonSchema): JsonSchema {
  const copy: JsonSchema = { ...schema };
  if (copy.properties && typeof copy.properties === "object") {
    copy.properties = Object.fromEntries(Object.entries(copy.properties as Record<string, JsonSchema>).map(([k, v]) => [k, closed(v)]));
    if (copy.additionalProperties === undefined) copy.additionalProperties = false;
  }
  if (copy.items && typeof copy.items === "object" && !Array.isArray(copy.items)) copy.items = closed(copy.items as JsonSchema);
  return copy;
}

/** A REST-facing action's request body: its fields, unknown ones refused (400 naming the field). */
export function bodySchema(fields: ParamField[]): JsonSchema {
  const required = fields.filter((f) => f.required).map((f) => f.name);
  return closed({ type: "object", properties: Object.fromEntries(fields.map((f) => [f.name, f.schema])), ...(required.length ? { required } : {}) });
}
