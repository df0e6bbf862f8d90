/** Reads server-sent events from a fetch response, one event at a time, for streaming tests. */
export type SseReader = {
  response: Response;
  /** The next event's data, parsed; undefined once the stream ended. */
  next(): Promise<any | undefined>;
  /** Every remaining event, until the stream ends. */
  rest(): Promise<any[]>;
  /** Closes the connection, as a client that goes away. */
  close(): void;
};

export async function openSse(url: string, init: { body: unknown; token: string }): Promise<SseReader> {
  const controller = new AbortController();
  const response = await fetch(url, {
    method: "POST",
    headers: { authorization: `Bearer ${init.token}`, "content-type": "application/json" },
    body: JSON.stringify(init.body),
    signal: controller.signal,
  });
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  let buffered = "";
  let ended = false;
  const next = async (): Promise<any | undefined> => {
    for (;;) {
      const end = buffered.indexOf("\n\n");
      if (end >= 0) {
        const block = buffered.slice(0, end);
        buffered = buffered.slice(end + 2);
        if (!block.startsWith("data: ") || block.includes("\n")) throw new Error(`Not a single-line SSE data event: ${JSON.stringify(block)}`);
        return JSON.parse(block.slice(6));
      }
      if (ended) {
        if (buffered) throw new Error(`Stream ended inside an event: ${JSON.stringify(buffered)}`);
        return undefined;
      }
      const { value, done } = await reader.read();
      if (done) ended = true;
      else buffered += decoder.decode(value, { stream: true });
    }
  };
  return {
    response,
    next,
    async rest() {
      const events: any[] = [];
      for (let e = await next(); e !== undefined; e = await next()) events.push(e);
      return events;
    },
    close: () => controller.abort(),
  };
}
