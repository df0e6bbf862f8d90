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

/** The raw blocks (text between blank lines) of a response body, one at a time; undefined at its end. */
function blockReader(response: Response): () => Promise<string | undefined> {
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  let buffered = "";
  let ended = false;
  return async () => {
    for (;;) {
      const end = buffered.indexOf("\n\n");
      if (end >= 0) {
        const block = buffered.slice(0, end);
        buffered = buffered.slice(end + 2);
        return block;
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
}

export async function openSse(url: string, init: { body: unknown; token: string }): Promise<SseReader> {
  const controller = new AbortController();
  const response = await fetch(url, {
    method: "POST",
    headers: { authorization: `Bearer ${init.token}`, "content-type": "application/json" },
    body: JSON.stringify(init.body),
    signal: controller.signal,
  });
  const nextBlock = blockReader(response);
  const next = async (): Promise<any | undefined> => {
    const block = await nextBlock();
    if (block === undefined) return undefined;
    if (!block.startsWith("data: ") || block.includes("\n")) throw new Error(`Not a single-line SSE data event: ${JSON.stringify(block)}`);
    return JSON.parse(block.slice(6));
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

/** One block of a text/event-stream: its `event` name and `data` (parsed JSON), or a comment line. */
export type StreamBlock = { event?: string; data?: any; comment?: string };

export type EventStreamReader = {
  response: Response;
  /** The next block; undefined once the stream ended. */
  next(): Promise<StreamBlock | undefined>;
  close(): void;
};

/** Opens GET `url` as a text/event-stream and reads it block by block (events and comments). */
export async function openEventStream(url: string, token: string): Promise<EventStreamReader> {
  const controller = new AbortController();
  const response = await fetch(url, { headers: { authorization: `Bearer ${token}` }, signal: controller.signal });
  const nextBlock = blockReader(response);
  const next = async (): Promise<StreamBlock | undefined> => {
    const text = await nextBlock();
    if (text === undefined) return undefined;
    const block: StreamBlock = {};
    for (const line of text.split("\n")) {
      if (line.startsWith(":")) block.comment = line.slice(1).trim();
      else if (line.startsWith("event: ")) block.event = line.slice(7);
      else if (line.startsWith("data: ")) block.data = JSON.parse(line.slice(6));
      else throw new Error(`Not an SSE line: ${JSON.stringify(line)}`);
    }
    return block;
  };
  return { response, next, close: () => controller.abort() };
}

/** The status events of a stream until it ends (keep-alive comments counted apart). */
export async function statusEvents(stream: EventStreamReader): Promise<{ statuses: string[]; jobs: any[]; comments: number }> {
  const jobs: any[] = [];
  let comments = 0;
  for (let b = await stream.next(); b !== undefined; b = await stream.next()) {
    if (b.comment !== undefined) comments++;
    else if (b.event === "status") jobs.push(b.data);
    else throw new Error(`Unexpected block ${JSON.stringify(b)}`);
  }
  return { statuses: jobs.map((j) => j.status), jobs, comments };
}
