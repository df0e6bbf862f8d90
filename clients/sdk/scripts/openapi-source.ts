/**
 * Where the SDK's types come from: the live document of a platform with every service, hashed in
 * a canonical form (sorted keys) so the drift test and the generator agree on "the same document".
 */
import { createHash } from "crypto";
import { readFileSync } from "fs";
import path from "path";

export const SCHEMA_FILE = path.join(__dirname, "../src/generated/schema.d.ts");
const HASH_LINE = /^\/\/ openapi-sha256: ([0-9a-f]{64})$/m;

function canonical(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonical);
  if (value && typeof value === "object")
    return Object.fromEntries(
      Object.keys(value)
        .sort()
        .map((k) => [k, canonical((value as Record<string, unknown>)[k])]),
    );
  return value;
}

export const documentHash = (doc: unknown) =>
  createHash("sha256")
    .update(JSON.stringify(canonical(doc)))
    .digest("hex");

/** The hash the committed schema.d.ts was generated from. */
export function committedHash(file = SCHEMA_FILE): string | undefined {
  return HASH_LINE.exec(readFileSync(file, "utf8"))?.[1];
}
