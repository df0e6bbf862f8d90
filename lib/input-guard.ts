/**
 * Strings PostgreSQL cannot store (NUL) or that are not text at all (unpaired UTF-16 surrogates),
 * found anywhere in a request's params; and the size the params take on the bus. Pure: used by
 * the input middleware (every action) and by the gateway (before anything is forwarded).
 */
import type { FieldError } from "./errors";

/** Objects are walked this deep; JSON input deeper than this is refused too (see `findUnstorable`). */
export const MAX_DEPTH = 64;

// ES2024's String#isWellFormed (native in Node 20), missing from the ES2022 lib this project compiles against.
const wellFormed = (s: string): boolean => (s as unknown as { isWellFormed(): boolean }).isWellFormed();

/** Why a string cannot be accepted, or null when it can. */
export function stringProblem(s: string): string | null {
  if (s.includes("\u0000")) return "must not contain NUL (\\u0000) characters";
  if (!wellFormed(s)) return "must be valid Unicode text (it holds an unpaired UTF-16 surrogate)";
  return null;
}

/**
 * Params objects already found clean in this process (the gateway checks before it calls): an
 * in-process call hands the same object on, so the input middleware need not walk it again.
 * A WeakSet of objects: nothing from the bus can claim a place in it.
 */
const clean = new WeakSet<object>();
export const markClean = (params: unknown): void => void (typeof params === "object" && params !== null && clean.add(params));
export const knownClean = (params: unknown): boolean => typeof params === "object" && params !== null && clean.has(params);

/** Only data is walked: class instances (streams, requests, Buffers) are not input fields. */
function isPlainObject(v: unknown): v is Record<string, unknown> {
  if (typeof v !== "object" || v === null) return false;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

const fieldPath = (parent: string, key: string) => (parent ? `${parent}.${key}` : key);

/** A field's place: object keys and array indexes from the top; spelled out only for a field refused. */
type Segment = string | number;
function pathOf(at: readonly Segment[]): string {
  let path = "";
  for (const s of at) path = typeof s === "number" ? `${path}[${s}]` : fieldPath(path, s);
  return path;
}

/**
 * The first few fields (keys included) holding a string `stringProblem` refuses, as
 * `{ field, message }` with a fastest-validator style path (`env.NAME`, `messages[0].content`).
 * Every request's params pass here: paths are built only for what is refused.
 */
export function findUnstorable(params: unknown, limit = 10): FieldError[] {
  const found: FieldError[] = [];
  walkUnstorable(params, [], 0, found, limit);
  return found;
}

function walkUnstorable(value: unknown, at: Segment[], depth: number, found: FieldError[], limit: number): void {
  if (found.length >= limit) return;
  if (typeof value === "string") {
    const problem = stringProblem(value);
    if (problem) {
      const path = pathOf(at);
      found.push({ field: path || "(params)", message: `The '${path || "params"}' field ${problem}.` });
    }
    return;
  }
  if (typeof value !== "object" || value === null) return;
  if (depth >= MAX_DEPTH) {
    const path = pathOf(at);
    found.push({ field: path, message: `The '${path}' field is nested too deeply (more than ${MAX_DEPTH} levels).` });
    return;
  }
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length && found.length < limit; i++) {
      at.push(i);
      walkUnstorable(value[i], at, depth + 1, found, limit);
      at.pop();
    }
    return;
  }
  if (!isPlainObject(value)) return;
  for (const key of Object.keys(value)) {
    const keyProblem = stringProblem(key);
    if (keyProblem) {
      const path = pathOf(at);
      found.push({ field: fieldPath(path, key), message: `A field name under '${path || "params"}' ${keyProblem}.` });
    }
    at.push(key);
    walkUnstorable(value[key], at, depth + 1, found, limit);
    at.pop();
    if (found.length >= limit) return;
  }
}

/**
 * UTF-8 bytes the params take as JSON, counted without building the JSON (an upper bound within a
 * few bytes per field: quotes, commas and escapes of control characters are counted generously).
 */
export function jsonSize(value: unknown, depth = 0): number {
  if (typeof value === "string") return Buffer.byteLength(value, "utf8") + 2 + escapes(value);
  if (typeof value === "number" || typeof value === "boolean") return 24;
  if (typeof value !== "object" || value === null || depth > MAX_DEPTH) return 4;
  let size = 2;
  if (Array.isArray(value)) {
    for (const item of value) size += jsonSize(item, depth + 1) + 1;
    return size;
  }
  if (!isPlainObject(value)) return size;
  for (const [key, item] of Object.entries(value)) size += jsonSize(key, depth + 1) + 1 + jsonSize(item, depth + 1) + 1;
  return size;
}

/** Extra bytes JSON escaping adds: `\"`, `\\` one each; control characters up to five. */
function escapes(s: string): number {
  let extra = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20) extra += 5;
    else if (c === 0x22 || c === 0x5c) extra += 1;
  }
  return extra;
}
