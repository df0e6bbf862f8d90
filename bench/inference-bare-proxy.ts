/**
 * The floor for bench:inference: a bare node:http process that forwards each request to the
 * provider over a kept-alive connection and pipes the answer back — what any extra process hop
 * costs on this machine, with no gateway, no broker, no validation or accounting.
 * Usage: PROVIDER_URL=http://127.0.0.1:port tsx bench/inference-bare-proxy.ts → prints {"url"}.
 */
import http from "http";
import type { AddressInfo } from "net";

const provider = new URL(process.env.PROVIDER_URL!);
const agent = new http.Agent({ keepAlive: true, maxSockets: 1024 });

const server = http.createServer((req, res) => {
  const upstream = http.request({ host: provider.hostname, port: provider.port, path: req.url, method: req.method, headers: req.headers, agent }, (answer) => {
    res.writeHead(answer.statusCode ?? 502, answer.headers);
    answer.pipe(res);
  });
  upstream.on("error", () => res.destroy());
  req.pipe(upstream);
});

server.listen(0, "127.0.0.1", () => process.stdout.write(`${JSON.stringify({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` })}\n`));
process.stdin.resume();
process.stdin.once("end", () => process.exit(0));
