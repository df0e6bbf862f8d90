/**
 * What the engine answers with, in the shapes every API shares: an answer, embeddings, and the
 * way a stream's events are written (the platform's own SSE events here; OpenAI's chunks in
 * openai-api.ts).
 */
import type { PublicFailure } from "./errors";
import type { Finish, StreamChunk, ToolCall, ToolCallDelta, Usage } from "./providers";

/** An answer: `model` is the one that answered (a fallback, maybe). */
export type Answer = Usage & Finish & { id: string; model: string; text: string; durationMs: number; toolCalls?: ToolCall[] };

export type Embedded = { id: string; model: string; vectors: number[][]; promptTokens: number };

/** How a stream's events are written (the platform's own SSE events, or OpenAI's chunks). */
export interface StreamFormat {
  delta(id: string, model: string, text: string): string;
  /** A part of a tool call (only requests that offered tools get these). */
  toolCall(id: string, model: string, part: ToolCallDelta): string;
  done(answer: Answer): string;
  error(failure: PublicFailure): string;
}

/** One server-sent event. */
export const sseEvent = (data: unknown): string => `data: ${JSON.stringify(data)}\n\n`;

/** The platform's stream events (API-DECISIONS "Inference"). */
export const PLATFORM_SSE: StreamFormat = {
  delta: (id, model, delta) => sseEvent({ id, model, delta }),
  // POST /api/models/infer offers no tools.
  toolCall: () => "",
  done: (a) => sseEvent({ id: a.id, model: a.model, response: a.text, tokensUsed: a.promptTokens + a.completionTokens, durationMs: a.durationMs, done: true }),
  error: (f) => sseEvent({ error: { code: f.code, message: f.message, details: f.details } }),
};

/** The stream's chunks, the first of them already read (it decided that this model answers). */
export async function* withFirst(first: IteratorResult<StreamChunk> | undefined, rest: AsyncIterator<StreamChunk>): AsyncGenerator<StreamChunk> {
  if (first?.done) return;
  if (first) yield first.value;
  for (let next = await rest.next(); !next.done; next = await rest.next()) yield next.value;
}
