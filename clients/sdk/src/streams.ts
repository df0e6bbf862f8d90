/**
 * What generation cannot type: server-sent events (job status, inference deltas) and a followed
 * log, as async iterators that close their connection when the loop stops early.
 */
import { errorFor } from "./errors";

export type SseMessage = { event?: string; data: string };

/** The chunks of a response body as text. */
export async function* textChunks(res: Response): AsyncGenerator<string> {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      const text = decoder.decode(value, { stream: true });
      if (text) yield text;
    }
    const tail = decoder.decode();
    if (tail) yield tail;
  } finally {
    // A consumer that stops early (break, an error) closes the connection: the server stops too.
    await reader.cancel().catch(() => undefined);
  }
}

/** Parses a text/event-stream body into messages; comments (keep-alives) are skipped. */
export async function* sseMessages(res: Response): AsyncGenerator<SseMessage> {
  let buffered = "";
  for await (const chunk of textChunks(res)) {
    buffered += chunk.replace(/\r\n/g, "\n");
    for (let end = buffered.indexOf("\n\n"); end >= 0; end = buffered.indexOf("\n\n")) {
      const block = buffered.slice(0, end);
      buffered = buffered.slice(end + 2);
      const message = parseBlock(block);
      if (message) yield message;
    }
  }
}

function parseBlock(block: string): SseMessage | undefined {
  let event: string | undefined;
  const data: string[] = [];
  for (const line of block.split("\n")) {
    if (line.startsWith(":") || line === "") continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "event") event = value;
    else if (field === "data") data.push(value);
  }
  return data.length ? { event, data: data.join("\n") } : undefined;
}

/** The JSON data of each message; an `{error}` message (a failure after the first byte) throws. */
export async function* jsonEvents<T>(res: Response, status = res.status): AsyncGenerator<{ event?: string; data: T }> {
  for await (const message of sseMessages(res)) {
    const data = JSON.parse(message.data) as T & { error?: { code: string; message: string; details?: unknown } };
    if (data && typeof data === "object" && data.error) throw errorFor(status, data.error.code, data.error.message, data.error.details ?? null);
    yield { event: message.event, data };
  }
}
