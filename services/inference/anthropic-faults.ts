/**
 * How the Messages API's parsers (anthropic-api.ts, anthropic-tools.ts) collect a request's
 * faults: each `{ field, message }` in the order found, a key the API does not have refused by
 * name, and a known one asking for what the platform does not do refused unless "off". Pure.
 */
import type { FieldError } from "../../lib/errors";
import { fieldPath, unknownField } from "../../lib/known-fields";

export type Body = Record<string, unknown>;
/** Whether a field's value asks for nothing (its "off" value). */
export type Off = (v: unknown) => boolean;

export const never: Off = () => false;
export const emptyList: Off = (v) => Array.isArray(v) && v.length === 0;
export const isObject = (v: unknown): v is Body => typeof v === "object" && v !== null && !Array.isArray(v);
export const given = (v: unknown) => v !== undefined && v !== null;

/** The faults of one request, in the order found. */
export class Faults {
  readonly list: FieldError[] = [];
  add(field: string, message: string): void {
    this.list.push({ field, message });
  }
  /** `value`'s keys outside `known`, and the known ones whose value is not "off", refused by name. */
  keys(value: Body, path: string, known: readonly string[], off: Record<string, [Off, string]> = {}): void {
    for (const key of Object.keys(value)) {
      const field = fieldPath(path, key);
      if (Object.hasOwn(off, key)) {
        if (given(value[key]) && !off[key][0](value[key])) this.add(field, off[key][1]);
      } else if (!known.includes(key)) this.list.push(unknownField(field));
    }
  }
}
