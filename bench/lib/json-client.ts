/**
 * The benches' HTTP client: JSON over node:http with keep-alive sockets (one per concurrent
 * request), about a fifth of `fetch`'s CPU per request. On a 2-core machine the bench's client
 * shares the cores with what it measures, so a heavy client slows the platform it drives.
 */
import http from "http";

export type Call = (method: string, urlPath: string, body?: unknown) => Promise<{ status: number; body: any; text: string }>;

/** A client of `base` sending `token` (none when empty), with at most `maxSockets` requests at once. */
export function jsonClient(base: string, token: string, maxSockets: number): Call {
  const agent = new http.Agent({ keepAlive: true, maxSockets });
  const url = new URL(base);
  return (method, urlPath, body) =>
    new Promise((resolve, reject) => {
      const data = body === undefined ? undefined : JSON.stringify(body);
      const req = http.request(
        {
          agent,
          host: url.hostname,
          port: url.port,
          method,
          path: urlPath,
          headers: {
            ...(token ? { authorization: `Bearer ${token}` } : {}),
            ...(data ? { "content-type": "application/json", "content-length": Buffer.byteLength(data) } : {}),
          },
        },
        (res) => {
          let text = "";
          res.setEncoding("utf8");
          res.on("data", (c) => (text += c));
          res.on("end", () => {
            let parsed: unknown;
            try {
              parsed = text ? JSON.parse(text) : undefined;
            } catch {
              parsed = undefined;
            }
            resolve({ status: res.statusCode ?? 0, body: parsed, text });
          });
        },
      );
      req.on("error", reject);
      req.end(data);
    });
}
