/**
 * A batch input file (JSONL, API-DECISIONS "Inference: the Batch API"): one request a line,
 * `{ "custom_id", "method": "POST", "url": "/v1/chat/completions" | "/v1/embeddings", "body" }`,
 * each body checked as its /v1 route checks it (openai-api.ts), custom_ids unique, at most
 * MAX_LINES lines and MAX_BYTES bytes. Pure: bad input is a list of faults, each naming its line.
 */
import { isUtf8 } from "buffer";
import { FieldError, validationFailed } from "../../../lib/errors";
import { parseChatCompletion, parseEmbeddings } from "../openai-api";

export const MAX_LINES = 50_000;
export const MAX_BYTES = 100 * 1024 * 1024;
export const BATCH_ENDPOINTS = ["/v1/chat/completions", "/v1/embeddings"] as const;
export type BatchEndpoint = (typeof BATCH_ENDPOINTS)[number];
const MAX_CUSTOM_ID = 512;
/** Faults named per upload: enough to fix a file, not a 50,000-line answer. */
const MAX_FAULTS = 20;
const LINE_FIELDS = new Set(["custom_id", "method", "url", "body"]);

export type InputLine = { line: number; customId: string; url: BatchEndpoint; body: Record<string, unknown> };
export type CheckedInput = { lines: InputLine[]; endpoint: BatchEndpoint | null };

/** The lines of a JSONL text: a last line without its newline counts, empty lines do not (as OpenAI reads JSONL). */
function rawLines(text: string): Array<[number, string]> {
  const out: Array<[number, string]> = [];
  text.split("\n").forEach((raw, i) => {
    const line = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
    if (line.trim() !== "") out.push([i + 1, line]);
  });
  return out;
}

/** The fault of a body its route would refuse, in that route's words. */
function bodyFault(url: BatchEndpoint, body: unknown): string | undefined {
  try {
    if (url === "/v1/chat/completions") {
      const request = parseChatCompletion(body);
      if (request.stream) return "body.stream: streaming is not available in a batch";
    } else parseEmbeddings(body);
    return undefined;
  } catch (err) {
    const details = (err as { data?: unknown }).data;
    const faults = Array.isArray(details) ? (details as FieldError[]) : [];
    return faults.map((f) => `body.${f.field}: ${f.message}`).join("; ") || (err as Error).message;
  }
}

function lineFault(value: unknown): { fault: string } | { ok: Omit<InputLine, "line"> } {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return { fault: "must be a JSON object" };
  const v = value as Record<string, unknown>;
  const unknown = Object.keys(v).filter((k) => !LINE_FIELDS.has(k));
  if (unknown.length) return { fault: `unknown field(s) ${unknown.join(", ")}` };
  if (typeof v.custom_id !== "string" || v.custom_id === "" || v.custom_id.length > MAX_CUSTOM_ID)
    return { fault: `custom_id must be a string of 1 to ${MAX_CUSTOM_ID} characters` };
  if (v.method !== "POST") return { fault: 'method must be "POST"' };
  if (!(BATCH_ENDPOINTS as readonly unknown[]).includes(v.url)) return { fault: `url must be one of ${BATCH_ENDPOINTS.join(", ")}` };
  const url = v.url as BatchEndpoint;
  if (v.body === null || typeof v.body !== "object" || Array.isArray(v.body)) return { fault: "body must be a JSON object" };
  const fault = bodyFault(url, v.body);
  return fault ? { fault } : { ok: { customId: v.custom_id, url, body: v.body as Record<string, unknown> } };
}

/** The file's lines, or 400 naming the faults by line (`file`: OpenAI's `param`). */
export function checkBatchInput(content: Buffer): CheckedInput {
  const refuse = (faults: string[]) => validationFailed(faults.map((message) => ({ field: "file", message })));
  if (content.length > MAX_BYTES) throw refuse([`must be at most ${MAX_BYTES} bytes`]);
  if (!isUtf8(content)) throw refuse(["must be UTF-8 text (JSONL)"]);
  const raw = rawLines(content.toString("utf8"));
  if (raw.length === 0) throw refuse(["must hold at least one request line"]);
  if (raw.length > MAX_LINES) throw refuse([`must hold at most ${MAX_LINES} lines, not ${raw.length}`]);
  const faults: string[] = [];
  const seen = new Map<string, number>();
  const lines: InputLine[] = [];
  for (const [n, text] of raw) {
    if (faults.length >= MAX_FAULTS) break;
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      faults.push(`line ${n}: is not valid JSON`);
      continue;
    }
    const checked = lineFault(value);
    if ("fault" in checked) {
      faults.push(`line ${n}: ${checked.fault}`);
      continue;
    }
    const earlier = seen.get(checked.ok.customId);
    if (earlier !== undefined) faults.push(`line ${n}: custom_id "${checked.ok.customId.slice(0, 100)}" is already used on line ${earlier}`);
    seen.set(checked.ok.customId, n);
    lines.push({ line: n, ...checked.ok });
  }
  if (faults.length) throw refuse(faults);
  const urls = new Set(lines.map((l) => l.url));
  return { lines, endpoint: urls.size === 1 ? lines[0].url : null };
}
