/**
 * A replica's OpenAI-compatible server as the tunnel tests put it on a serve socket: a whole chat
 * answer `<prefix>to <model>` (with usage), or a stream of `max_tokens` words (5 by default), one
 * every 100 ms. `onStreamClosed` hears each stream's connection close, and whether it was finished.
 */
import http from "http";

export function replicaStub(prefix = "", onStreamClosed: (finished: boolean) => void = () => undefined): http.Server {
  return http.createServer((req, res) => {
    let raw = "";
    req.on("data", (c) => (raw += c));
    req.on("end", () => {
      const body = JSON.parse(raw || "{}");
      if (!body.stream) {
        res.writeHead(200, { "content-type": "application/json" });
        return res.end(
          JSON.stringify({
            choices: [{ message: { content: `${prefix}to ${body.model}` }, finish_reason: "stop" }],
            usage: { prompt_tokens: 1, completion_tokens: 2 },
          }),
        );
      }
      res.writeHead(200, { "content-type": "text/event-stream" });
      const words = body.max_tokens ?? 5;
      let n = 0;
      const timer = setInterval(() => {
        if (n === words) {
          clearInterval(timer);
          return res.end("data: [DONE]\n\n");
        }
        res.write(`data: ${JSON.stringify({ choices: [{ delta: { content: `w${n++} ` } }] })}\n\n`);
      }, 100);
      res.once("close", () => (clearInterval(timer), onStreamClosed(n === words)));
    });
  });
}
