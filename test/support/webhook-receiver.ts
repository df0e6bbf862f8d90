/** A local webhook receiver on 127.0.0.1 for tests and the bench: records each request; `answer` picks each status. */
import http from "http";
import type { AddressInfo } from "net";

export type Received = { path: string; headers: Record<string, string>; body: string; status: number };

export type Receiver = {
  url(path: string): string;
  received: Received[];
  /** Requests to `path` so far. */
  to(path: string): Received[];
  close(): Promise<void>;
};

/** `answer(path, nth)`: the status for the nth (1-based) request to `path`; default 200. */
export async function startReceiver(answer: (path: string, nth: number) => number = () => 200): Promise<Receiver> {
  const received: Received[] = [];
  const counts = new Map<string, number>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const path = req.url ?? "/";
      const nth = (counts.get(path) ?? 0) + 1;
      counts.set(path, nth);
      const status = answer(path, nth);
      received.push({ path, headers: req.headers as Record<string, string>, body: Buffer.concat(chunks).toString("utf8"), status });
      res.writeHead(status).end();
    });
  });
  server.keepAliveTimeout = 1;
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: (path) => `http://127.0.0.1:${port}${path}`,
    received,
    to: (path) => received.filter((r) => r.path === path),
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
