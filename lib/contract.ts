/**
 * Response contracts. A service declares each response once, with TypeBox: the declaration is the
 * JSON Schema the gateway publishes and, through `Static<typeof X>`, the handler's TypeScript type.
 * An action documents its route beside `rest` and `params` with `openapi` (types/moleculer.d.ts);
 * the gateway reads it from the registry and publishes every schema with `$id` under that name in
 * `components.schemas` (services/api-gateway/openapi/generator.ts). The public contract: fields
 * may be added, never renamed, retyped or dropped.
 */
import { type Static, type TSchema, Type } from "@sinclair/typebox";
import type { ErrorCode } from "./errors";

export { type Static, Type };

/** The document's tags (their descriptions: generator.ts). */
export type ApiTag = "auth" | "gpu" | "models" | "databases" | "admin" | "usage" | "reference";

/** An action's route in the OpenAPI document, beyond what its `rest`, `params` and `auth` say. */
export type RouteDoc = {
  tag: ApiTag;
  summary: string;
  description?: string;
  /** The success status. */
  status: number;
  response: TSchema;
  /** Defaults to application/json. */
  contentType?: string;
  /** Extra content types of the success response (e.g. a stream). */
  alternatives?: Record<string, { schema: TSchema; description: string }>;
  /** Errors of this route besides those every route of its kind can answer (generator.ts). */
  errors?: ErrorCode[];
  /** Left out of the document (the /v1 routes: OpenAI's own reference describes them, errors included). */
  hidden?: true;
};

// The helpers below keep the published forms plain (`enum`, `type: [X, "null"]`, `oneOf`): TypeBox's
// own unions would publish `anyOf` of consts, a different document for the same contract.

/** `{type: "string", enum: values}`, typed as the union of the values. */
export const StringEnum = <T extends string[]>(values: [...T], options: Record<string, unknown> = {}) =>
  Type.Unsafe<T[number]>({ ...options, type: "string", enum: values });

/** The schema with `null` added to its `type` (a scalar that may be null). */
export const Nullable = <T extends TSchema & { type: string }>(schema: T) =>
  // entries(): the string keys only, so the copy does not keep TypeBox's Kind of the original.
  Type.Unsafe<Static<T> | null>({ ...Object.fromEntries(Object.entries(schema)), type: [schema.type, "null"] });

/** `oneOf: [null, schema]` (an object that may be null). */
export const OrNull = <T extends TSchema>(schema: T) => Type.Unsafe<Static<T> | null>({ oneOf: [Type.Null(), schema] });
