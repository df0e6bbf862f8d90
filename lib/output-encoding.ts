/**
 * Job output is bytes; JSON and PostgreSQL text cannot hold all of them (NUL, invalid UTF-8).
 * `output` is always a readable string (invalid bytes and NUL become U+FFFD); when that string
 * is not exactly the job's bytes, `outputBase64` carries them losslessly beside it.
 */

export type EncodedOutput = { output: string; outputBase64?: string };

const REPLACEMENT = "\ufffd";

/** Readable text of `bytes`, plus their base64 when the text alone would lose something. */
export function encodeOutput(bytes: Buffer): EncodedOutput {
  const decoded = bytes.toString("utf8");
  const exact = !decoded.includes("\u0000") && Buffer.byteLength(decoded) === bytes.length && Buffer.from(decoded).equals(bytes);
  if (exact) return { output: decoded };
  return { output: decoded.replaceAll("\u0000", REPLACEMENT), outputBase64: bytes.toString("base64") };
}

/** The job's exact bytes from a stored or received result. */
export function decodeOutput(result: EncodedOutput): Buffer {
  return result.outputBase64 !== undefined ? Buffer.from(result.outputBase64, "base64") : Buffer.from(result.output);
}

/**
 * A string PostgreSQL text/jsonb and JSON can hold: NUL and lone surrogates become U+FFFD.
 * For strings from untrusted senders (node events) before they are stored.
 */
export function storableText(s: string): string {
  // String.prototype.toWellFormed (Node 20) replaces lone surrogates with U+FFFD; lib types lag behind.
  const wellFormed = (s as string & { toWellFormed(): string }).toWellFormed();
  return wellFormed.includes("\u0000") ? wellFormed.replaceAll("\u0000", REPLACEMENT) : wellFormed;
}
