/**
 * Streamed responses (server-sent events). An action returns a Readable, which moleculer-web
 * pipes to the client chunk by chunk, and may set `ctx.meta.$streamAbort`. When the client goes
 * away before the end, moleculer-web's pipeline destroys the gateway's stream: in one process that
 * is the service's own stream, and destroying it cancels the work; across NATS it is only the
 * transit's copy, so the hook's action is called on the node that serves the stream.
 */
import type { ServerResponse } from "http";
import type { Context, LoggerInstance } from "moleculer";

export type StreamAbortHook = {
  /** Action to call, e.g. "inference.abort". */
  action: string;
  params: Record<string, unknown>;
  /** The node serving the stream: the abort must reach that replica, not any. */
  nodeID: string;
};

type StreamMeta = { $streamAbort?: StreamAbortHook };

const isReadable = (data: unknown): boolean =>
  typeof data === "object" && data !== null && typeof (data as { pipe?: unknown }).pipe === "function" && (data as { readable?: unknown }).readable === true;

/** Called from the route's onAfterCall with the action's result, before moleculer-web sends it. */
export function watchStream(ctx: Context<unknown, StreamMeta>, res: ServerResponse, data: unknown, logger: LoggerInstance): void {
  if (!isReadable(data)) return;
  // Each event must leave at once: no Nagle delay on the client socket.
  res.socket?.setNoDelay(true);
  // The status line too, before a first byte (a followed queued job has none yet); once moleculer-web has set the headers.
  setImmediate(() => {
    if (!res.headersSent && !res.writableEnded && !res.destroyed) res.flushHeaders();
  });
  const hook = ctx.meta.$streamAbort;
  if (!hook || hook.nodeID === ctx.broker.nodeID) return;
  res.once("close", () => {
    if (res.writableFinished) return;
    ctx
      .call(hook.action, hook.params, { nodeID: hook.nodeID })
      .catch((err: Error) => logger.warn(`Could not cancel a stream whose client went away (${hook.action}): ${err.message}`));
  });
}
