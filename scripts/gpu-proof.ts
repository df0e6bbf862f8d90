/**
 * The real-GPU path on a host with an NVIDIA driver, without the rest of the platform: the node's
 * own discovery reads nvidia-smi, then CUDA jobs run through the node's process executor on the
 * first card (sandboxed when bubblewrap works here, else unisolated, and it says which), in a
 * cgroup of its own where the host has one; a job that fills /dev/shm past its cgroup's memory
 * then shows the limit holds beside the card. Last, a model deployment's replica on the card: a
 * sandboxed job serving OpenAI's HTTP API whose answers are computed by a CUDA kernel, reached
 * through the node's serve relay as the platform reaches replicas (the job still has no network).
 * Prints one JSON report and exits non-zero when a step fails.
 *
 *   npx tsx scripts/gpu-proof.ts            (or a bundle of it: node gpu-proof.js)
 *   GPU_PROOF_PYTHON=/path/to/python3       a Python with PyTorch for the second job (optional)
 */
import { chmodSync, mkdtempSync } from "fs";
import os from "os";
import { PassThrough } from "stream";
import path from "path";
import { detectCgroups } from "../services/gpu-node/cgroup-host";
import { describeEnforcement } from "../services/gpu-node/cgroups";
import { discoverCards, NodeCard } from "../services/gpu-node/discovery";
import type { JobOutcome } from "../services/gpu-node/job";
import { relayHost } from "../services/gpu-node/platform-access";
import { findBwrap, ProcessExecutor, ProcessIsolation, probeSandbox } from "../services/gpu-node/process-executor";
import { serveAnswer } from "../services/gpu-node/serve-relay";

/** A vector add in CUDA C++, built with nvcc inside the job and checked on the card. */
const CUDA_JOB = String.raw`
set -e
export PATH="$PATH:/usr/local/cuda/bin"
cd "$HOME"
cat > add.cu <<'EOF'
#include <cstdio>
__global__ void add(const float* a, const float* b, float* c, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) c[i] = a[i] + b[i]; }
int main() {
  const int n = 1 << 20; static float a[1 << 20], b[1 << 20], c[1 << 20]; float *da, *db, *dc;
  for (int i = 0; i < n; i++) { a[i] = i; b[i] = 2 * i; }
  cudaMalloc(&da, n * 4); cudaMalloc(&db, n * 4); cudaMalloc(&dc, n * 4);
  cudaMemcpy(da, a, n * 4, cudaMemcpyHostToDevice); cudaMemcpy(db, b, n * 4, cudaMemcpyHostToDevice);
  add<<<(n + 255) / 256, 256>>>(da, db, dc, n);
  if (cudaMemcpy(c, dc, n * 4, cudaMemcpyDeviceToHost) != cudaSuccess) { printf("kernel failed\n"); return 2; }
  for (int i = 0; i < n; i++) if (c[i] != 3.0f * i) { printf("wrong at %d\n", i); return 3; }
  cudaDeviceProp p; cudaGetDeviceProperties(&p, 0); int count; cudaGetDeviceCount(&count);
  printf("cuda ok: %s, %d SMs, devices visible %d\n", p.name, p.multiProcessorCount, count);
  return 0;
}
EOF
nvcc -o add add.cu
echo "CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES"
./add
`;

/** A deployment's replica: the vector add built as above, served as an OpenAI chat model on its port (node; no network). */
const REPLICA_PORT = 8000;
const REPLICA_SERVER = String.raw`
const http = require("http");
const { execFileSync } = require("child_process");
const json = (res, body) => (res.setHeader("content-type", "application/json"), res.end(JSON.stringify(body)));
http.createServer((req, res) => {
  if (req.url === "/v1/models") return json(res, { object: "list", data: [{ id: "cuda-add", object: "model", owned_by: "gpu-proof" }] });
  req.resume().on("end", () => {
    const content = execFileSync("./add").toString().trim();
    json(res, { id: "chatcmpl-proof", object: "chat.completion", model: "cuda-add", choices: [{ index: 0, message: { role: "assistant", content }, finish_reason: "stop" }] });
  });
}).listen(Number(process.env.PORT), "127.0.0.1");
`;
/** The replica's command: `build` (leaving ./add), then the server. */
export const replicaJob = (build = CUDA_JOB.replace(/\n\.\/add\n$/, "\n")) => `${build}
echo '${Buffer.from(REPLICA_SERVER).toString("base64")}' | base64 -d > server.js
PORT=${REPLICA_PORT} exec node server.js
`;

/** One HTTP/1.0 exchange with a replica through its node's serve relay, as the serve action answers: the whole answer. */
async function throughNode(relayDir: string, jobId: string, request: string): Promise<string> {
  const out = new PassThrough();
  // As the node's serve action answers the platform: paced and coalesced (serve-pacing.ts).
  const socket = await serveAnswer(relayDir, jobId, out);
  const chunks: Buffer[] = [];
  socket.on("data", (c: Buffer) => chunks.push(c));
  const closed = new Promise((resolve) => socket.once("close", resolve));
  out.end(request);
  await closed;
  return Buffer.concat(chunks).toString();
}

/** Serves `command` (replicaJob) on the card and asks it, through the node, for its models and a chat answer. */
export async function replicaOnCard(
  limits: () => { timeoutS: number; graceS: number; logDir: string },
  isolation: ProcessIsolation,
  card: NodeCard,
  command = replicaJob(),
) {
  const relayDir = mkdtempSync(path.join(os.tmpdir(), "gpu-proof-relay-"));
  chmodSync(relayDir, 0o711); // as the node makes GPU_RELAY_DIR: the job's user passes through to its own folder
  const executor = new ProcessExecutor(limits, isolation, relayHost({ databasePort: 5432, databaseSslMode: "prefer", dir: relayDir }));
  const jobId = `gpu-proof-replica-${Date.now()}`;
  const start = Date.now();
  const job = executor.run({ jobId, card, command, timeoutS: 300, servePort: REPLICA_PORT });
  let ended = false;
  void job.outcome.then(() => (ended = true));
  let models = "";
  for (const deadline = Date.now() + 120_000; Date.now() < deadline && !ended && !models.startsWith("HTTP/1.1 200");) {
    models = await throughNode(relayDir, jobId, "GET /v1/models HTTP/1.0\r\n\r\n").catch((err: Error) => err.message);
    if (!models.startsWith("HTTP/1.1 200")) await new Promise((r) => setTimeout(r, 250));
  }
  const readyS = (Date.now() - start) / 1000;
  const body = JSON.stringify({ model: "cuda-add", messages: [{ role: "user", content: "add" }] });
  const t0 = Date.now();
  const chat = await throughNode(
    relayDir,
    jobId,
    `POST /v1/chat/completions HTTP/1.0\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`,
  ).catch((err: Error) => err.message);
  const answerMs = Date.now() - t0;
  await job.stop("cancel");
  const outcome = await job.outcome;
  const answer = chat.slice(chat.indexOf("\r\n\r\n") + 4);
  return { readyS, answerMs, models: models.split("\r\n")[0], answer, ok: /cuda ok: /.test(answer), outcome };
}

const TORCH_JOB = (python: string) =>
  `${python} -c "import torch, os; x = torch.randn(4096, 4096, device='cuda'); y = (x @ x).sum().item(); ` +
  `print('torch ok:', torch.cuda.get_device_name(0), torch.cuda.device_count(), 'visible, CUDA_VISIBLE_DEVICES=' + os.environ['CUDA_VISIBLE_DEVICES'])"`;

async function runJob(executor: ProcessExecutor, card: NodeCard, command: string, timeoutS: number): Promise<{ outcome: JobOutcome | null; seconds: number }> {
  const start = Date.now();
  const job = executor.run({ jobId: `gpu-proof-${Date.now()}`, card, command, timeoutS });
  const outcome = await job.outcome;
  return { outcome, seconds: (Date.now() - start) / 1000 };
}

async function main(): Promise<void> {
  const report: Record<string, unknown> = { host: os.hostname(), at: new Date().toISOString() };
  const cards = await discoverCards({ nodeId: "gpu-proof", simulate: undefined, production: true });
  report.cards = cards;
  const real = cards.filter((c) => !c.simulated);
  if (!real.length) throw new Error("no real card discovered");

  const logDir = mkdtempSync(path.join(os.tmpdir(), "gpu-proof-"));
  const limits = () => ({ timeoutS: 300, graceS: 2, logDir });
  const bwrap = findBwrap();
  let isolation: ProcessIsolation = { kind: "unisolated" };
  const cgroups = await detectCgroups();
  report.cgroups = describeEnforcement(cgroups.layout, cgroups.layout ? undefined : cgroups.why);
  const sandboxOf = (memoryMb: number): ProcessIsolation & { kind: "sandbox" } => ({
    kind: "sandbox",
    bwrap: bwrap!,
    uid: 65534,
    gid: 65534,
    // the per-process limits stay wide, so the cgroup is what binds
    limits: { processes: 512, memoryBytes: 16 * 1024 ** 3, tmpBytes: 1024 ** 3, shmBytes: 4 * 1024 ** 3 },
    ...(cgroups.layout ? { cgroups: { layout: cgroups.layout, limits: { memoryBytes: memoryMb * 1024 * 1024, pids: 512 } } } : {}),
  });
  if (bwrap) {
    const broken = await probeSandbox(sandboxOf(4096));
    report.sandbox = broken ?? "works";
    if (!broken) isolation = sandboxOf(4096);
  } else report.sandbox = "bubblewrap not installed";
  report.isolation = isolation.kind;
  const executor = new ProcessExecutor(limits, isolation);

  const jobs: Record<string, unknown> = {};
  jobs.cuda = await runJob(executor, real[0], CUDA_JOB, 240);
  const python = process.env.GPU_PROOF_PYTHON;
  if (python) jobs.torch = await runJob(new ProcessExecutor(limits, { kind: "unisolated" }), real[0], TORCH_JOB(python), 240);
  if (isolation.kind === "sandbox" && cgroups.layout) {
    const capped = await runJob(new ProcessExecutor(limits, sandboxOf(512)), real[0], "head -c 1500M /dev/zero > /dev/shm/fill; echo survived", 120);
    report.memoryCap = capped;
    if (capped.outcome?.type !== "failed" || !/ran out of memory/.test(capped.outcome.errorMessage)) jobs.memoryCapNotEnforced = capped;
  }
  if (isolation.kind === "sandbox") {
    const replica = await replicaOnCard(limits, isolation, real[0]);
    report.replica = replica;
    if (!replica.ok) jobs.replicaNotServing = replica;
  } else report.replica = "not run: a replica's serve relay needs the sandbox";
  report.jobs = jobs;
  console.log(JSON.stringify(report, null, 2));
  const failed = Object.values(jobs).some(
    (j) => (j as { outcome: JobOutcome | null }).outcome?.type !== "finished" || (j as { outcome: { exitCode: number } }).outcome.exitCode !== 0,
  );
  process.exit(failed ? 1 : 0);
}

if (require.main === module)
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
