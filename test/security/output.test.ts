/**
 * Attack replays on job output (issue 9 "memory amplification", issue 19 "oversized logs",
 * "NUL-printing job", "output over ~64 MB"), against real processes: the platform runs in child
 * processes (one process on the in-process bus, and gateway / scheduler / node apart over the
 * real NATS), jobs run in the real process executor and the real Docker engine.
 */
import Docker from "dockerode";
import { mkdtempSync, readFileSync, rmSync, statSync } from "fs";
import os from "os";
import path from "path";
import { DockerExecutor } from "../../services/gpu-node/docker-executor";
import { checkJobEvent } from "../../lib/gpu-protocol";
import type { JobLimits } from "../../services/gpu-node/job";
import { PagedBodyStream } from "../../lib/paged-body";
import { http, startTestPlatform, uniqueName, waitFor } from "../support/platform";
import { startNatsPlatform } from "../support/nats-platform";
import { removeContainersOf, simulatedCard } from "../support/docker";

const TEST_JOB_IMAGE = process.env.TEST_JOB_IMAGE || "ci-platform/test-busybox:latest";
const MiB = 1024 * 1024;

/** Resident memory of a process, from /proc (bytes). */
function rssOf(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, "utf8").match(/^VmRSS:\s+(\d+) kB$/m);
  if (!line) throw new Error(`no VmRSS for ${pid}`);
  return Number(line[1]) * 1024;
}

/** Reads a response body chunk by chunk without keeping it: its length and its last bytes. */
async function drain(res: Response, keepLast = 4096): Promise<{ bytes: number; tail: Buffer }> {
  let bytes = 0;
  let tail = Buffer.alloc(0);
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    bytes += chunk.length;
    tail = Buffer.concat([tail, chunk]).subarray(-keepLast);
  }
  return { bytes, tail };
}

/** A platform in child processes (`groups`, one process each), with one account and helpers for its GPU API. */
async function startPlatform(groups: string[][], transporter?: string) {
  const work = mkdtempSync(path.join(os.tmpdir(), "output-sec-"));
  const platform = await startNatsPlatform({
    prefix: "out",
    transporter,
    work,
    env: {
      JWT_SECRET: "output-test-secret",
      GPU_EXECUTOR: "process",
      // The sandbox is tested on its own (sandbox.test.ts); here the output path is under test.
      GPU_UNSAFE_UNISOLATED_JOBS: "true",
      GPU_SIMULATE: "Output Test GPU:8192",
      GPU_HEARTBEAT_S: "0.5",
      GPU_SCHEDULE_TICK_MS: "200",
      GPU_JOB_LOG_DIR: path.join(work, "logs"),
    },
    processes: groups,
  });
  const base = platform.baseUrl;
  try {
    const token = await platform.waitFor(
      async () => {
        const res = await http(base, "POST", "/api/auth/register", {
          body: { email: `${uniqueName("out")}@example.com`, name: "Output", password: "correct horse battery" },
        }).catch(() => undefined);
        return res?.status === 201 ? (res.body.accessToken as string) : false;
      },
      { timeoutMs: 60_000, message: "the platform to register an account" },
    );
    await platform.waitFor(async () => (await http(base, "GET", "/api/gpu/status", { token })).body?.cluster?.totalGpus === 1, {
      timeoutMs: 30_000,
      message: "the card announced",
    });
    const submit = async (command: string) => {
      const res = await http(base, "POST", "/api/gpu/jobs", { token, body: { command } });
      expect(res.status).toBe(201);
      return res.body.id as string;
    };
    const until = (id: string, accept: (job: any) => boolean, message: string, timeoutMs = 60_000) =>
      platform.waitFor(
        async () => {
          const res = await http(base, "GET", `/api/gpu/jobs/${id}`, { token });
          return accept(res.body) ? res.body : false;
        },
        { timeoutMs, intervalMs: 50, message },
      );
    const logs = (id: string) => fetch(`${base}/api/gpu/jobs/${id}/logs`, { headers: { authorization: `Bearer ${token}` } });
    return { base, token, children: platform.children, alive: platform.alive, stop: platform.stop, submit, until, logs };
  } catch (err) {
    await platform.stop();
    throw err;
  }
}

describe("output - job events from a hostile or broken node", () => {
  it("events - a finished event with NUL, lone surrogates, 1 MB of output and bad base64 is made storable, not refused", () => {
    const hostile = {
      type: "finished",
      jobId: "6f1c2b8e-0000-4000-8000-000000000001",
      nodeId: "n1",
      gpuUuid: "g1",
      at: new Date().toISOString(),
      exitCode: 0,
      output: "x".repeat(1024 * 1024) + "\u0000\ud800END",
      outputBase64: "not base64 at all!",
    };
    const checked = checkJobEvent(hostile);
    expect(checked.ok).toBe(true);
    const event = checked.ok ? checked.value : null;
    if (event?.type !== "finished") throw new Error("expected a finished event");
    expect(event.output.length).toBeLessThanOrEqual(4 * 65536);
    expect(event.output.endsWith("x\ufffd\ufffdEND")).toBe(true); // PostgreSQL would refuse NUL and a lone surrogate
    expect(event.outputBase64).toBeUndefined();
  });
});

describe("output - one process on the in-process bus", () => {
  let platform: Awaited<ReturnType<typeof startPlatform>>;
  beforeAll(async () => {
    platform = await startPlatform([["api-gateway", "auth", "gpu-scheduler", "gpu-node"]], "");
  }, 90_000);
  afterAll(() => platform?.stop());

  it("logs - 10 concurrent readers of a 64 MiB log do not amplify memory (RSS growth < 200 MB)", async () => {
    // Just under the node's 64 MiB cap: the whole log is served.
    const id = await platform.submit(`yes 0123456789abcdef | head -c ${64 * MiB - 16}; printf LAST-LINE`);
    await platform.until(id, (j) => j.status === "completed", "the 64 MiB job to complete", 120_000);
    const pid = platform.children[0].proc.pid!;
    const warm = await drain(await platform.logs(id)); // one read first: code paths loaded, pools sized
    expect(warm.bytes).toBe(64 * MiB - 16 + "LAST-LINE".length);
    const baseline = rssOf(pid);
    let peak = baseline;
    const sampler = setInterval(() => (peak = Math.max(peak, rssOf(pid))), 20);
    try {
      const reads = await Promise.all(Array.from({ length: 10 }, async () => drain(await platform.logs(id))));
      for (const read of reads) {
        expect(read.bytes).toBe(64 * MiB - 16 + "LAST-LINE".length);
        expect(read.tail.toString().endsWith("LAST-LINE")).toBe(true);
      }
    } finally {
      clearInterval(sampler);
    }
    // Before streaming, each reader held the whole log as one string: 176 MB → 2.5 GB.
    expect(peak - baseline).toBeLessThan(200 * 1024 * 1024);
    platform.alive();
  }, 240_000);

  it("jobs - a NUL-printing job completes with lossless output and frees its card at once", async () => {
    const id = await platform.submit("printf 'before\\000after\\377\\n'");
    const done = await platform.until(id, (j) => j.status !== "queued" && j.status !== "running", "the NUL job to end", 20_000);
    const bytes = Buffer.from("before\u0000after\u00ff\n", "latin1");
    expect(done).toMatchObject({ status: "completed", errorMessage: null, result: { exitCode: 0, output: "before\ufffdafter\ufffd\n" } });
    expect(Buffer.from(done.result.outputBase64, "base64").equals(bytes)).toBe(true);
    const res = await platform.logs(id);
    expect(res.status).toBe(200);
    expect(Buffer.from(await res.arrayBuffer()).equals(bytes)).toBe(true); // the log is the raw bytes
    // The single card is free: the next job starts within seconds (it used to wait 30-40 s, then failed).
    const next = await platform.submit("echo next");
    await platform.until(next, (j) => j.status === "completed", "the next job on the same card", 5_000);
  }, 60_000);

  it("logs - output over the cap: the log ends with the complete truncation note, the result with the real last line", async () => {
    // GPU_JOB_OUTPUT_MAX_MB is 64 here: 66 MiB and a last line.
    const id = await platform.submit(`yes 0123456789abcdef | head -c ${66 * MiB}; echo; echo THE-REAL-LAST-LINE`);
    const done = await platform.until(id, (j) => j.status === "completed", "the job to complete", 120_000);
    const omitted = 66 * MiB + 1 + "THE-REAL-LAST-LINE\n".length - 64 * MiB;
    const note = `[ci-platform: output truncated: ${omitted} bytes omitted after the first ${64 * MiB} bytes (the node's cap, GPU_JOB_OUTPUT_MAX_MB); the job result holds the last 65536 bytes]`;
    expect(done.result.output.startsWith(`${note}\n`)).toBe(true);
    expect(done.result.output.endsWith("\nTHE-REAL-LAST-LINE\n")).toBe(true);
    const read = await drain(await platform.logs(id));
    expect(read.bytes).toBe(64 * MiB + note.length + 2);
    expect(read.tail.toString().endsWith(`\n${note}\n`)).toBe(true);
  }, 240_000);
});

describe("output - a reader that leaves", () => {
  it("logs - a client that disconnects after the first chunk stops the paging at once", async () => {
    const work = mkdtempSync(path.join(os.tmpdir(), "output-leave-"));
    const platform = await startTestPlatform({
      services: ["api-gateway", "auth", "gpu-scheduler", "gpu-node"],
      env: { GPU_EXECUTOR: "process", GPU_UNSAFE_UNISOLATED_JOBS: "true", GPU_SIMULATE: "Leave Test GPU:8192", GPU_HEARTBEAT_S: "0.5", GPU_JOB_LOG_DIR: work },
    });
    const reads = jest.spyOn(PagedBodyStream.prototype, "_read");
    const destroyed = jest.spyOn(PagedBodyStream.prototype, "_destroy");
    try {
      const base = platform.baseUrl;
      const token = await waitFor(
        async () => {
          const res = await http(base, "POST", "/api/auth/register", {
            body: { email: `${uniqueName("leave")}@example.com`, name: "Leave", password: "correct horse battery" },
          });
          return res.status === 201 ? (res.body.accessToken as string) : false;
        },
        { timeoutMs: 30_000, message: "an account" },
      );
      await waitFor(async () => (await http(base, "GET", "/api/gpu/status", { token })).body?.cluster?.totalGpus === 1, { message: "the card" });
      const created = await http(base, "POST", "/api/gpu/jobs", { token, body: { command: `head -c ${64 * MiB} /dev/zero | tr '\\0' x` } });
      const id = created.body.id;
      await waitFor(async () => (await http(base, "GET", `/api/gpu/jobs/${id}`, { token })).body.status === "completed", {
        timeoutMs: 60_000,
        message: "the job",
      });
      const abort = new AbortController();
      const res = await fetch(`${base}/api/gpu/jobs/${id}/logs`, { headers: { authorization: `Bearer ${token}` }, signal: abort.signal });
      const reader = res.body!.getReader();
      expect((await reader.read()).value!.length).toBeGreaterThan(0);
      abort.abort(); // the client leaves after its first chunk
      await waitFor(() => destroyed.mock.calls.length > 0, { message: "the gateway's stream destroyed" });
      const pagesAsked = reads.mock.calls.length;
      expect(pagesAsked).toBeLessThan(16); // of 256 pages: only what was in flight when the client left
      // Nothing more is fetched for a client that is gone.
      await http(base, "GET", "/api/gpu/status", { token });
      expect(reads.mock.calls.length).toBe(pagesAsked);
    } finally {
      reads.mockRestore();
      destroyed.mockRestore();
      await platform.stop();
      rmSync(work, { recursive: true, force: true });
    }
  }, 120_000);
});

describe("output - gateway, scheduler and node in separate processes over NATS", () => {
  it("logs - a 12 MB log through the gateway over NATS (max_payload 1 MB) keeps scheduler and gateway up", async () => {
    const platform = await startPlatform([["api-gateway", "auth"], ["gpu-scheduler"], ["gpu-node"]]);
    try {
      const id = await platform.submit(`yes 0123456789abcdef | head -c ${12 * 1000 * 1000}; printf END`);
      await platform.until(id, (j) => j.status === "completed", "the 12 MB job to complete", 60_000);
      const res = await platform.logs(id);
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toMatch(/^text\/plain/);
      const read = await drain(res);
      expect(read.bytes).toBe(12 * 1000 * 1000 + 3);
      expect(read.tail.toString()).toMatch(/(0123456789abcdef\n)+012345END$/); // 12e6 = 705882 lines of 17 bytes + 6
      platform.alive(); // before: the scheduler exited on MAX_PAYLOAD_EXCEEDED
      expect((await http(platform.base, "GET", `/api/gpu/jobs/${id}`, { token: platform.token })).status).toBe(200);
    } finally {
      await platform.stop();
    }
  }, 180_000);
});

describe("output - Docker jobs", () => {
  const docker = new Docker();
  const namespace = uniqueName("outputtest");
  const card = simulatedCard("GPU-sim-output-0");
  let logDir: string;
  beforeAll(async () => {
    await docker.ping();
    await docker.getImage(TEST_JOB_IMAGE).inspect();
    logDir = mkdtempSync(path.join(os.tmpdir(), "output-docker-"));
  });
  afterAll(async () => {
    await removeContainersOf(docker, namespace);
    rmSync(logDir, { recursive: true, force: true });
  });

  it("jobs - 100 MB of Docker output: the result ends with the real last line, the note says what was cut, the log is capped", async () => {
    const limits: JobLimits = { timeoutS: 120, graceS: 1, logDir, outputMaxBytes: 64 * MiB };
    const executor = new DockerExecutor(
      docker,
      () => ({
        nodeId: "output-node",
        namespace,
        defaultImage: TEST_JOB_IMAGE,
        limits: { memoryMb: 256, cpus: 1, pids: 64, network: "none" },
        allowedRegistries: ["docker.io"],
      }),
      () => limits,
    );
    const job = executor.run({ jobId: uniqueName("job"), card, command: "yes 0123456789abcdef | head -c 100000000; echo; echo THE-REAL-LAST-LINE-42" });
    const outcome = await job.outcome;
    expect(outcome).toMatchObject({ type: "finished", exitCode: 0 });
    const omitted = 100_000_000 + 1 + "THE-REAL-LAST-LINE-42\n".length - 64 * MiB;
    expect(outcome!.output.startsWith(`[ci-platform: output truncated: ${omitted} bytes omitted after the first ${64 * MiB} bytes`)).toBe(true);
    // 1e8 bytes = 5882352 lines of 17 bytes and 16 more, then the echoes.
    expect(outcome!.output.endsWith("\n0123456789abcdef\nTHE-REAL-LAST-LINE-42\n")).toBe(true);
    const file = path.join(logDir, `${job.jobId}.log`);
    expect(statSync(file).size).toBeLessThan(64 * MiB + 512);
    expect(statSync(file).size).toBeGreaterThan(64 * MiB);
    const end = readFileSync(file).subarray(-400).toString();
    expect(end).toMatch(new RegExp(`\\n\\[ci-platform: output truncated: ${omitted} bytes omitted .*the job result holds the last 65536 bytes\\]\\n$`));
  }, 180_000);

  it("jobs - a gpu-node restart loses no Docker output: what the job printed meanwhile is recovered and marked", async () => {
    const limits: JobLimits = { timeoutS: 120, graceS: 1, logDir };
    const executor = () =>
      new DockerExecutor(
        docker,
        () => ({
          nodeId: "restart-node",
          namespace,
          defaultImage: TEST_JOB_IMAGE,
          limits: { memoryMb: 256, cpus: 1, pids: 64, network: "none" },
          allowedRegistries: ["docker.io"],
        }),
        () => limits,
      );
    // The job prints one line a second: some before the node lets go, some while no node watches, some after.
    const job = executor().run({ jobId: uniqueName("job"), card, command: "i=0; while [ $i -lt 8 ]; do echo line-$i; i=$((i+1)); sleep 1; done" });
    const file = path.join(logDir, `${job.jobId}.log`);
    await waitFor(() => readFileSync(file, "utf8").includes("line-0"), { message: "the first line captured" });
    job.detach(); // the node stops; the container goes on
    const [summary] = await docker.listContainers({ filters: { label: [`ci-platform.job-id=${job.jobId}`] } });
    const container = docker.getContainer(summary.Id);
    await waitFor(async () => (await container.logs({ stdout: true, stderr: true, follow: false })).toString().includes("line-3"), {
      message: "lines printed while no node watched",
    });
    const [adopted] = await executor().adopt([card.uuid]);
    expect(adopted.jobId).toBe(job.jobId);
    const outcome = await adopted.outcome;
    expect(outcome).toMatchObject({ type: "finished", exitCode: 0 });
    const lines = Array.from({ length: 8 }, (_, i) => `line-${i}\n`).join("");
    expect(outcome!.output).toBe(lines); // the tail carries on from the first capture: nothing lost, nothing twice
    const log = readFileSync(file, "utf8");
    expect(log.replace(/\n\[ci-platform: [^\]]*\]\n/, "")).toBe(lines);
    expect(log).toMatch(/\[ci-platform: the GPU node was restarting; \d+ bytes printed meanwhile were recovered/);
  }, 60_000);
});
