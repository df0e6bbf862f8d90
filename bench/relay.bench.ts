/**
 * bench:relay — what the relay of a job with platform access (issue 28) adds to a call of the
 * platform's HTTP API. A stand-in "platform" answers a chat-sized POST (about 1 KiB each way); the
 * same Node.js client runs (1) on the host against it directly and (2) in a sandboxed job (the
 * process executor, bubblewrap) against CI_PLATFORM_URL, through the forwarder and the node-side
 * relay. Each makes REQUESTS sequential requests on one keep-alive connection (p50 / p99, ms) and
 * then CONCURRENT requests at once on connections of their own (all answered, wall ms). Prints
 * one table; the added p50 is the relay's cost (goal: at most 1 ms).
 */
import { execFile } from "child_process";
import { chmodSync, mkdtempSync, rmSync } from "fs";
import http from "http";
import type { AddressInfo } from "net";
import os from "os";
import path from "path";
import { promisify } from "util";
import { relayHost } from "../services/gpu-node/platform-access";
import { ProcessExecutor } from "../services/gpu-node/process-executor";
import { simulatedCard, testSandbox } from "../test/support/sandbox";

const REQUESTS = Number(process.env.REQUESTS ?? 2000);
const CONCURRENT = Number(process.env.CONCURRENT ?? 100);

/** The client, plain JavaScript for `node -e <client> <baseUrl> <requests> <concurrent>`: prints one JSON line. */
const CLIENT = `
const http = require("http");
const [base, requests, concurrent] = [process.argv[1], Number(process.argv[2]), Number(process.argv[3])];
const body = JSON.stringify({ model: "m", messages: [{ role: "user", content: "x".repeat(900) }] });
const post = (agent) => new Promise((resolve, reject) => {
  const req = http.request(base + "/v1/chat/completions", { method: "POST", agent, headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) } }, (res) => {
    let n = 0; res.on("data", (c) => (n += c.length)); res.on("end", () => (res.statusCode === 200 ? resolve(n) : reject(new Error("status " + res.statusCode))));
  });
  req.on("error", reject); req.end(body);
});
(async () => {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  for (let i = 0; i < 50; i++) await post(agent);
  const ms = [];
  for (let i = 0; i < requests; i++) { const t = process.hrtime.bigint(); await post(agent); ms.push(Number(process.hrtime.bigint() - t) / 1e6); }
  ms.sort((a, b) => a - b);
  const t = process.hrtime.bigint();
  const answered = (await Promise.all(Array.from({ length: concurrent }, () => post(new http.Agent({ keepAlive: false })).then(() => 1, () => 0)))).reduce((a, b) => a + b, 0);
  const wall = Number(process.hrtime.bigint() - t) / 1e6;
  console.log(JSON.stringify({ p50: ms[Math.floor(ms.length / 2)], p99: ms[Math.floor(ms.length * 0.99)], answered, wall }));
  agent.destroy();
})();
`;

type Result = { p50: number; p99: number; answered: number; wall: number };

/** A chat completion's size: about 1 KiB of JSON. */
const ANSWER = JSON.stringify({
  id: "chatcmpl-1",
  object: "chat.completion",
  choices: [{ index: 0, message: { role: "assistant", content: "y".repeat(800) } }],
});

async function main(): Promise<void> {
  const server = http.createServer((req, res) => {
    req.resume();
    req.on("end", () => res.writeHead(200, { "content-type": "application/json" }).end(ANSWER));
  });
  server.maxConnections = CONCURRENT * 4;
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  const dir = mkdtempSync(path.join(os.tmpdir(), "bench-relay-"));
  chmodSync(dir, 0o711);
  try {
    // Not execFileSync: the stand-in answers from this process's event loop.
    const { stdout } = await promisify(execFile)(process.execPath, ["-e", CLIENT, `http://127.0.0.1:${port}`, String(REQUESTS), String(CONCURRENT)]);
    const direct = JSON.parse(stdout) as Result;
    const relay = relayHost({ platformUrl: `http://127.0.0.1:${port}`, databasePort: 5432, databaseSslMode: "prefer", dir });
    const sandbox = testSandbox({ limits: { processes: 1024, memoryBytes: 4 * 2 ** 30, tmpBytes: 64 << 20 } });
    const executor = new ProcessExecutor(() => ({ timeoutS: 600, graceS: 1, logDir: dir }), sandbox, relay);
    const command = `exec ${process.execPath} -e "$CLIENT" "$CI_PLATFORM_URL" ${REQUESTS} ${CONCURRENT}`;
    const job = executor.run({
      jobId: "bench-relay",
      card: simulatedCard("GPU-sim-bench-relay"),
      command,
      env: { CLIENT },
      platform: { token: `cit_${"0".repeat(32)}`, databases: [] },
    });
    const outcome = await job.outcome;
    if (outcome?.type !== "finished" || outcome.exitCode !== 0) throw new Error(`the job failed: ${JSON.stringify(outcome)}`);
    const relayed = JSON.parse(outcome.output.trim().split("\n").pop()!) as Result;
    const row = (name: string, r: Result) => `| ${name} | ${r.p50.toFixed(3)} | ${r.p99.toFixed(3)} | ${r.answered}/${CONCURRENT} in ${r.wall.toFixed(0)} ms |`;
    console.log(`bench:relay — ${REQUESTS} sequential chat-sized POSTs (keep-alive), then ${CONCURRENT} at once; load ${os.loadavg()[0].toFixed(2)}`);
    console.log("| client | p50 ms | p99 ms | concurrent |\n|---|---|---|---|");
    console.log(row("host → platform (direct)", direct));
    console.log(row("sandboxed job → CI_PLATFORM_URL (relay)", relayed));
    console.log(`added p50: ${(relayed.p50 - direct.p50).toFixed(3)} ms (goal ≤ 1 ms)`);
  } finally {
    server.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
