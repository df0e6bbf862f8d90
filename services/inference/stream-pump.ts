/**
 * A streamed answer on its way to the client: the provider's chunks become server-sent events in
 * the caller's format on a Readable, each chunk re-arms the deadline, and the end (answered,
 * failed, or cut by the client) is recorded once. Destroying the Readable cancels the provider call.
 */
import { Readable } from "stream";
import { asFailure } from "./errors";
import type { StreamFormat } from "./answers";
import { Attempt, AttemptLog, elapsed } from "./attempt-log";
import type { CallControl } from "./call-control";
import { estimateTokens } from "./model-info";
import type { Finish, StreamChunk, ToolCall, Usage } from "./providers";

/** The client's end of a stream: destroying it (the client went away) aborts the provider call. */
export function clientStream(control: CallControl): Readable {
  return new Readable({
    read() {},
    destroy(err, callback) {
      control.abort("Client closed the stream");
      callback(err);
    },
  });
}

export type Pump = {
  attempt: Attempt;
  chunks: AsyncIterable<StreamChunk>;
  control: CallControl;
  stream: Readable;
  format: StreamFormat;
  /** The prompt's text, to estimate its tokens when the stream is cut before the provider counted them. */
  prompt: string;
  log: AttemptLog;
  /** Called once the provider call is over, before the stream ends. */
  settled: () => void;
};

/** Writes the chunks to the stream until they end or fail; resolves to the tokens the stream used. */
export async function pump({ attempt, chunks, control, stream, format, prompt, log, settled }: Pump): Promise<number> {
  const { id, entry } = attempt;
  const send = (event: string) => {
    if (!stream.destroyed) stream.push(event);
  };
  let text = "";
  const toolCalls: ToolCall[] = [];
  let deltas = 0;
  let usage: Usage & Finish = { promptTokens: 0, completionTokens: 0 };
  try {
    for await (const chunk of chunks) {
      control.touch();
      if (chunk.type === "delta") {
        text += chunk.text;
        deltas += 1;
        send(format.delta(id, entry.name, chunk.text));
      } else if (chunk.type === "tool_call") {
        const { type: _, ...part } = chunk;
        const call = (toolCalls[part.index] ??= { id: "", name: "", arguments: "" });
        call.id ||= part.id ?? "";
        call.name ||= part.name ?? "";
        call.arguments += part.arguments;
        deltas += 1;
        send(format.toolCall(id, entry.name, part));
      } else usage = chunk;
    }
    const durationMs = elapsed(attempt.startedAt);
    const { promptTokens, completionTokens, finishReason } = usage;
    const calls = toolCalls.filter(Boolean);
    send(
      format.done({
        id,
        model: entry.name,
        text,
        promptTokens,
        completionTokens,
        durationMs,
        ...(finishReason ? { finishReason } : {}),
        ...(calls.length ? { toolCalls: calls } : {}),
      }),
    );
    log.answered(attempt, durationMs, usage);
  } catch (err) {
    const failure = asFailure(err);
    // Cut before the provider counted: what was generated still counts (about one token a chunk).
    if (deltas && !usage.completionTokens) usage = { promptTokens: estimateTokens(prompt), completionTokens: deltas };
    const pub = log.failed(attempt, failure, usage);
    if (failure.kind !== "aborted") send(format.error(pub));
  } finally {
    control.dispose();
    settled();
    if (!stream.destroyed) stream.push(null);
  }
  return usage.promptTokens + usage.completionTokens;
}
