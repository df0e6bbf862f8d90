/**
 * Large response bodies over the bus, page by page. An action answers with its first page and
 * names (in `ctx.meta.$pagedBody`) the action that serves the next ones; the gateway turns that
 * into a stream that asks for the next page only once the client has taken the previous one.
 * So no process holds a whole body, every bus message stays small, and a client that leaves
 * stops the paging. Bytes travel as base64: the bus serializer is JSON.
 * Live bodies (a followed log, status events) use the same paging: a page call waits, bounded,
 * for something new; `stop` names the action that cancels the page in flight when the client leaves.
 */
import { Readable } from "stream";
import type { Context } from "moleculer";

/** `next`: the params of the call for the following page; null after the last. */
export type BodyPage = { data: string; next: Record<string, unknown> | null };
/** `stop`: called with the in-flight page's params when the client leaves before the end (cancels its wait on every hop). */
export type PagedBodyMeta = { $pagedBody?: { action: string; stop?: string } };

export const isBodyPage = (v: unknown): v is BodyPage => typeof v === "object" && v !== null && typeof (v as BodyPage).data === "string" && "next" in v;

export class PagedBodyStream extends Readable {
  private next: Record<string, unknown> | null;
  private fetching: Record<string, unknown> | null = null;

  constructor(
    first: BodyPage,
    private readonly fetchPage: (params: Record<string, unknown>) => Promise<BodyPage>,
    /** Written instead of the rest when a later page fails (the status line has gone already). */
    private readonly failureNote: (err: Error) => string,
    /** The reader left before the end: told the params of the page in flight (or the next one). */
    private readonly onAbandon?: (params: Record<string, unknown>) => void,
  ) {
    super();
    this.push(Buffer.from(first.data, "base64"));
    this.next = first.next;
  }

  /** The reader went away (client disconnected): no page is asked for after this. */
  override _destroy(err: Error | null, callback: (err?: Error | null) => void): void {
    const pending = this.fetching ?? this.next;
    this.next = null;
    if (pending) this.onAbandon?.(pending);
    callback(err);
  }

  override _read(): void {
    if (this.fetching || this.destroyed) return;
    if (!this.next) {
      this.push(null);
      return;
    }
    this.fetching = this.next;
    this.fetchPage(this.next).then(
      (page) => {
        this.fetching = null;
        if (this.destroyed) return;
        this.next = page.next;
        // Pushing data makes the stream ask for more when it wants it; an empty page would not.
        if (page.data) this.push(Buffer.from(page.data, "base64"));
        else this._read();
      },
      (err: Error) => {
        this.fetching = null;
        if (this.destroyed) return;
        this.push(this.failureNote(err));
        this.push(null);
      },
    );
  }
}

/**
 * The stream for an action's paged answer (same caller, same meta; `beforePage` may refresh the
 * meta, e.g. a short-lived caller token); other answers pass through. Each page is its own call
 * with the broker's timeout: a body read for longer than the request's timeout (a followed log)
 * must not have its later pages skipped as past the request's deadline.
 */
export function pagedBody(ctx: Context, data: unknown, beforePage: () => void = () => undefined): unknown {
  const meta = ctx.meta as PagedBodyMeta;
  const paging = meta.$pagedBody;
  if (!paging || !isBodyPage(data)) return data;
  delete meta.$pagedBody;
  const call = (action: string, params: Record<string, unknown>) => ctx.broker.call<BodyPage, Record<string, unknown>>(action, params, { parentCtx: ctx });
  const stop = paging.stop;
  return new PagedBodyStream(
    data,
    (params) => {
      beforePage();
      return call(paging.action, params);
    },
    () => "\n[ci-platform: the rest of this output could not be read; retry the request]\n",
    stop ? (params) => void call(stop, params).catch(() => undefined) : undefined,
  );
}
