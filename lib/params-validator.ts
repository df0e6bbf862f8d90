/**
 * The broker's params validator (moleculer.config.ts). An action's `params` may be a TypeBox
 * schema, the same kind of schema as its response (lib/contract.ts), compiled once with TypeBox's
 * compiler; or fastest-validator rules as before, so actions move over one at a time.
 *
 * For a REST-facing action (one with `rest`) strings from the query string and the path become
 * the numbers and booleans its TypeBox schema wants, and its unknown fields are left to
 * UnknownFieldsMiddleware (middlewares/unknown-fields.middleware.ts), which refuses them by name
 * once the caller is checked.
 *
 * Errors are moleculer's ValidationError with `{ field, message }` entries, which the gateway's
 * error mapper answers as 400 VALIDATION_FAILED.
 */
import type { TSchema } from "@sinclair/typebox";
import { TypeCompiler, type ValueError, ValueErrorType } from "@sinclair/typebox/compiler";
import { Value } from "@sinclair/typebox/value";
import { type ActionSchema, type Context, Errors, type ServiceBroker, Validators } from "moleculer";
import type { FieldError } from "./errors";
import { fieldPath, isJsonSchemaParams, pathParamsOf, restRoutesOf, unknownField } from "./known-fields";

type Schema = Record<string, unknown>;
type Outcome = true | FieldError[];
export type ParamsCheck = ((params: unknown, opts?: unknown) => Outcome | Promise<Outcome>) & { async?: boolean };
type Handler = (ctx: Context) => Promise<unknown>;

const BODYLESS = new Set(["GET", "HEAD", "DELETE"]);
const TRUE = new Set(["true", "1", "on"]);
const FALSE = new Set(["false", "0", "off"]);

/** A string a query string or a path gave, as the number or boolean the schema wants (fastest-validator's `convert: true`). */
function converted(schema: Schema, value: unknown): unknown {
  if (typeof value !== "string") return value;
  const types = ([] as unknown[]).concat(schema.type);
  const n = Number(value);
  if ((types.includes("number") || types.includes("integer")) && value.trim() !== "" && Number.isFinite(n)) return n;
  if (types.includes("boolean") && TRUE.has(value)) return true;
  if (types.includes("boolean") && FALSE.has(value)) return false;
  return value;
}

/** `/messages/0/content` (JSON Pointer) → `messages[0].content`, following `value` to tell list indexes from keys. */
function pathOf(pointer: string, value: unknown): string {
  let path = "";
  let at = value;
  for (const raw of pointer.split("/").slice(1)) {
    const key = raw.replace(/~1/g, "/").replace(/~0/g, "~");
    path = Array.isArray(at) && /^\d+$/.test(key) ? fieldPath(path, Number(key)) : fieldPath(path, key);
    at = typeof at === "object" && at !== null ? (at as Record<string, unknown>)[key] : undefined;
  }
  return path;
}

/**
 * What a union's failure is about: an optional field that may also be null (`X | null`) fails as
 * X does; a choice of constants names them.
 */
function specific(error: ValueError): ValueError | string {
  if (error.type !== ValueErrorType.Union) return error;
  const variants = ((error.schema as { anyOf?: Schema[] }).anyOf ?? []).filter((s) => s.type !== "null");
  if (variants.length > 1 && variants.every((s) => s.const !== undefined)) return `must be one of ${variants.map((s) => JSON.stringify(s.const)).join(", ")}`;
  for (const variant of error.errors) {
    const first = variant.First();
    if (first && first.type !== ValueErrorType.Null) return specific(first);
  }
  return error;
}

/** `error`: `specific(found)`, computed once (it reads the union's variants' error iterators). */
function entryOf(found: ValueError, field: string, error = specific(found)): FieldError {
  if (found.type === ValueErrorType.ObjectAdditionalProperties) return unknownField(field);
  if (typeof error === "string") return { field, message: `The '${field}' field ${error}.` };
  if (error.type === ValueErrorType.StringPattern) return { field, message: `The '${field}' field fails to match the required pattern.` };
  if (!field) return { field: "(request)", message: `The request is invalid: ${error.message.toLowerCase()}.` };
  if (error.type === ValueErrorType.ObjectRequiredProperty) return { field, message: `The '${field}' field is required.` };
  return { field, message: `The '${field}' field is invalid: ${error.message.charAt(0).toLowerCase()}${error.message.slice(1)}.` };
}

/**
 * A TypeBox schema's check: its defaults filled in, the `convert` fields' strings converted, then
 * the compiled check; one entry per field (TypeBox may find several faults in one). `leaveUnknown`:
 * fields `additionalProperties: false` refuses pass, for UnknownFieldsMiddleware to refuse once the
 * caller is checked.
 */
export function typeBoxCheck(schema: TSchema, convert: "all" | ReadonlySet<string> = new Set(), leaveUnknown = false): ParamsCheck {
  const compiled = TypeCompiler.Compile(schema);
  const properties = (schema.properties ?? {}) as Record<string, Schema>;
  // Value.Default walks the whole schema on each call: only where there is a default to fill in.
  const hasDefaults = JSON.stringify(schema).includes('"default":');
  return (params: unknown): Outcome => {
    if (hasDefaults) Value.Default(schema, params);
    if (typeof params === "object" && params !== null && !Array.isArray(params)) {
      const fields = params as Record<string, unknown>;
      for (const key of Object.keys(fields))
        if (properties[key] && (convert === "all" || convert.has(key))) fields[key] = converted(properties[key], fields[key]);
    }
    if (compiled.Check(params)) return true;
    const entries = new Map<string, FieldError>();
    for (const error of compiled.Errors(params)) {
      // Also one inside an optional field that may be null (a union): the middleware names it.
      const inner = specific(error);
      if (leaveUnknown && typeof inner !== "string" && inner.type === ValueErrorType.ObjectAdditionalProperties) continue;
      const field = pathOf(error.path, params);
      if (!entries.has(field)) entries.set(field, entryOf(error, field, inner));
    }
    return entries.size ? [...entries.values()] : true;
  };
}

/** moleculer's ValidationError, as its own validator raises it: the gateway answers 400 VALIDATION_FAILED with `{ field, message }` details. */
export const paramsError = (ctx: Context, faults: FieldError[]) =>
  new Errors.ValidationError(
    "Parameters validation error!",
    "VALIDATION_ERROR",
    faults.map((f) => ({ ...f, nodeID: ctx.nodeID, action: ctx.action?.name })),
  );

export class ParamsValidator extends Validators.Base {
  private readonly fastest = new Validators.Fastest();

  /** Params checked as given: a TypeBox schema (defaults applied) or fastest-validator rules. Events and bus-only actions. */
  override compile(schema: Schema): ParamsCheck {
    return isJsonSchemaParams(schema) ? typeBoxCheck(schema as TSchema) : (this.fastest.compile(schema) as ParamsCheck);
  }

  /** An action's check; a REST-facing one's converts what HTTP gives as strings and leaves unknown fields to UnknownFieldsMiddleware. */
  checkOf(action: ActionSchema): ParamsCheck | undefined {
    const schema = typeof action.params === "object" && action.params !== null ? (action.params as Schema) : undefined;
    if (!schema || !action.rest) return schema && this.compile(schema);
    const routes = restRoutesOf(action.rest);
    if (isJsonSchemaParams(schema)) {
      // Query strings and path segments are strings; a JSON body keeps its types.
      const convert = routes.some((r) => BODYLESS.has(r.method)) ? "all" : pathParamsOf(routes);
      return typeBoxCheck(schema as TSchema, convert, true);
    }
    // Unknown fields are refused by name once the caller is checked: `$$strict` must neither drop them nor name their parent first.
    const rules = { ...schema };
    delete rules.$$strict;
    return this.fastest.compile(rules) as ParamsCheck;
  }

  override validate(params: Schema, schema: Schema): boolean {
    const outcome = this.compile(schema)(params);
    if (outcome instanceof Promise) throw new Error("An async params schema cannot be validated synchronously");
    if (outcome !== true) throw new Errors.ValidationError("Parameters validation error!", "VALIDATION_ERROR", outcome);
    return true;
  }

  override convertSchemaToMoleculer(schema: Schema): Schema {
    return schema;
  }

  // moleculer 0.14 calls it with the broker and takes a middleware object (as its Base returns); its typing says a function.
  override middleware(broker?: ServiceBroker): ReturnType<Validators.Base["middleware"]> {
    const base = (Validators.Base.prototype.middleware as unknown as (b?: ServiceBroker) => Record<string, unknown>).call(this, broker);
    const reject = (ctx: Context, faults: FieldError[]) => Promise.reject(paramsError(ctx, faults));
    return {
      ...base,
      localAction: (handler: Handler, action: ActionSchema): Handler => {
        const check = this.checkOf(action);
        if (!check) return handler;
        return function validateParams(ctx: Context) {
          if (ctx.params == null) ctx.params = {};
          const outcome = check(ctx.params, { meta: ctx });
          if (!check.async) return outcome === true ? handler(ctx) : reject(ctx, outcome as FieldError[]);
          return Promise.resolve(outcome).then((o) => (o === true ? handler(ctx) : reject(ctx, o)));
        };
      },
    } as never;
  }
}
