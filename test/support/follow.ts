/** Reads a followed log (GET …/logs?follow=true) as it arrives, for streaming tests. */
export type FollowReader = {
  response: Response;
  /** Everything received so far. */
  text(): string;
  /** Reads until `accept(all text so far)`; fails if the body ends first. */
  until(accept: (text: string) => boolean): Promise<string>;
  /** Reads to the end; the whole body. */
  rest(): Promise<string>;
  /** Closes the connection, as a client that goes away. */
  close(): void;
};

export async function followLog(url: string, token: string): Promise<FollowReader> {
  const controller = new AbortController();
  const response = await fetch(url, { headers: { authorization: `Bearer ${token}` }, signal: controller.signal });
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  let text = "";
  let ended = false;
  const more = async (): Promise<boolean> => {
    const { value, done } = await reader.read();
    if (done) ended = true;
    else text += decoder.decode(value, { stream: true });
    return !done;
  };
  return {
    response,
    text: () => text,
    async until(accept) {
      while (!accept(text)) if (ended || !(await more())) throw new Error(`Body ended before the condition; got ${JSON.stringify(text)}`);
      return text;
    },
    async rest() {
      while (!ended) await more();
      return text;
    },
    close: () => controller.abort(),
  };
}
