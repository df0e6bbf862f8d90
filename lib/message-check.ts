/**
 * Checks of untrusted bus messages, compiled once from their TypeBox schemas (the kind of schema
 * the responses and the job are declared with). A refusal names the first field that failed,
 * never the value a sender chose, so it can go in a log line as it is.
 */
import type { TSchema } from "@sinclair/typebox";
import { TypeCompiler } from "@sinclair/typebox/compiler";
import { FormatRegistry } from "@sinclair/typebox";

/** The message, or the first field that failed (`cards[1].uuid`; "the message" when it is not even an object). */
export type Checked<T> = { ok: true; value: T } | { ok: false; field: string };

// A timestamp as the platform reads one (Date.parse), for `format: "date-time"`.
if (!FormatRegistry.Has("date-time")) FormatRegistry.Set("date-time", (value) => !Number.isNaN(Date.parse(value)));

const NOT_AN_OBJECT = "the message";

/**
 * A JSON pointer (`/cards/0/uuid`) as a field path (`cards[0].uuid`). An element of a list of
 * scalars is named by its list (`runningJobIds`): the index says nothing more to an operator.
 */
function fieldOf(path: string, failed: TSchema): string {
  const parts = path.split("/").slice(1);
  if (parts.length && /^\d+$/.test(parts[parts.length - 1]) && failed.type !== "object") parts.pop();
  let field = "";
  for (const part of parts) field += /^\d+$/.test(part) ? `[${part}]` : field ? `.${part}` : part;
  return field || NOT_AN_OBJECT;
}

/** A check of `schema`: extra fields are allowed (a newer sender may add some), wrong or missing ones are not. */
export function messageCheck<T>(schema: TSchema): (value: unknown) => Checked<T> {
  const compiled = TypeCompiler.Compile(schema);
  return (value) => {
    if (compiled.Check(value)) return { ok: true, value: value as T };
    const first = compiled.Errors(value).First();
    return { ok: false, field: first ? fieldOf(first.path, first.schema) : NOT_AN_OBJECT };
  };
}
