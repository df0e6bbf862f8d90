/** Small builders of JSON Schema literals, shared by the documents of the /v1 APIs (OpenAI's and Anthropic's shapes). */
import type { JsonSchema } from "./schema";

export const text = (description: string): JsonSchema => ({ type: "string", description });

export const object = (required: string[], properties: Record<string, JsonSchema>, more: JsonSchema = {}): JsonSchema => ({
  type: "object",
  required,
  properties,
  ...more,
});

/** OpenAI's `{"object": "list", "data": [...]}` of `item`s, with more fields beside. */
export const list = (id: string, item: JsonSchema, more: Record<string, JsonSchema> = {}): JsonSchema =>
  object(["object", "data", ...Object.keys(more)], { object: { const: "list" }, data: { type: "array", items: item }, ...more }, { $id: id });

/** A JSON Schema given by the caller (a tool's parameters, a response format's schema): any object. */
export const userSchema = (description: string): JsonSchema => ({ type: "object", description });

/** OpenAI's rule for function and schema names (services/inference/openai-api-tools.ts). */
export const FUNCTION_NAME: JsonSchema = { type: "string", pattern: "^[a-zA-Z0-9_-]{1,64}$" };

/** The `text/event-stream` answer of a request with `stream: true`: its events described in words (OpenAPI has no schema for a stream). */
export const sseAlternative = (events: string) => ({ schema: { type: "string", description: events }, description: "With stream: true, server-sent events" });
