/**
 * Attack replays: a hostile job tries to reach the platform from inside its sandbox (issue 9,
 * "jobs never see the platform"). The same table runs against both executors: a bubblewrap
 * process (GPU_EXECUTOR=process) and a Docker container, on the real bwrap and the real engine.
 * This test process plays the platform: its environment holds a secret, its checkout is ROOT.
 */
import Docker from "dockerode";
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from "fs";
import net from "net";
import os from "os";
import path from "path";
import { evaluateReadiness } from "../../lib/health";
import type { NodeCard } from "../../services/gpu-node/discovery";
import { DockerExecutor } from "../../services/gpu-node/docker-executor";
import type { JobExecutor, JobLimits, JobOutcome } from "../../services/gpu-node/job";
import { ProcessExecutor } from "../../services/gpu-node/process-executor";
import { readLogPage } from "../../services/gpu-node/log-store";
import { ROOT, startTestPlatform, TestPlatform, uniqueName, waitFor } from "../support/platform";
import { ensureFullBusyboxImage, testSandbox } from "../support/sandbox";
import { removeContainersOf } from "../support/docker";

const card: NodeCard = {
  uuid: "GPU-sim-sandbox-0",
  index: 0,
  name: "Sandbox Test GPU",
  memoryTotal: 1024,
  memoryUsed: 0,
  utilization: 0,
  temperature: 30,
  simulated: true,
};
const SECRET = `platform-secret-${uniqueName("s")}`;
const docker = new Docker();
const namespace = uniqueName("sandboxtest");

/** Resolves whether anything connects to 127.0.0.1:<port> (the test's stand-in for NATS, Redis, …). */
async function loopbackListener(): Promise<{ port: number; connections: () => number; close: () => Promise<void> }> {
  let count = 0;
  const server = net.createServer((socket) => {
    count++;
    socket.on("error", () => undefined); // the host-side check hangs up at once
    socket.end('INFO {"server_id":"stand-in"}\r\n');
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { port: (server.address() as net.AddressInfo).port, connections: () => count, close: () => new Promise((r) => server.close(() => r())) };
}

/** Whether this host accepts a TCP connection to 127.0.0.1:port (so a refusal inside means something). */
function reachableFromHost(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, "127.0.0.1", () => (socket.destroy(), resolve(true)));
    socket.once("error", () => resolve(false));
  });
}

let logDir: string;
let limits: JobLimits;
let listener: Awaited<ReturnType<typeof loopbackListener>>;
const otherJobLog = () => path.join(logDir, "someone-elses-job.log");

const executors: [string, () => JobExecutor][] = [
  ["bubblewrap process", () => new ProcessExecutor(() => limits, testSandbox())],
  [
    "docker container",
    () =>
      new DockerExecutor(
        docker,
        () => ({
          nodeId: "sandbox-node",
          namespace,
          defaultImage: ensureFullBusyboxImage(),
          limits: { memoryMb: 256, cpus: 1, pids: 64, network: "none" },
          allowedRegistries: ["docker.io"],
        }),
        () => limits,
      ),
  ],
];

async function runJob(executor: JobExecutor, command: string): Promise<JobOutcome> {
  const outcome = await executor.run({ jobId: uniqueName("job"), card, command }).outcome;
  if (!outcome) throw new Error("the job was let go");
  return outcome;
}

beforeAll(async () => {
  process.env.CI_PLATFORM_TEST_SECRET = SECRET;
  logDir = mkdtempSync(path.join(os.tmpdir(), "sandbox-logs-"));
  chmodSync(logDir, 0o755); // readable by anyone on the host: only the sandbox stands in the way
  writeFileSync(otherJobLog(), `DATABASE_URL=postgresql://admin:${SECRET}@db/x\n`, { mode: 0o644 });
  limits = { timeoutS: 30, graceS: 1, logDir };
  listener = await loopbackListener();
  await docker.ping();
  ensureFullBusyboxImage();
});

afterAll(async () => {
  delete process.env.CI_PLATFORM_TEST_SECRET;
  await listener?.close();
  rmSync(logDir, { recursive: true, force: true });
  await removeContainersOf(docker, namespace);
});

describe.each(executors)("sandbox - a hostile job in a %s", (kind, makeExecutor) => {
  let executor: JobExecutor;
  beforeAll(() => {
    executor = makeExecutor();
  });

  test(`sandbox (${kind}) - a job cannot read the platform's environment through /proc/1/environ, /proc/<platform pid>/environ or env`, async () => {
    const outcome = await runJob(
      executor,
      `cat /proc/1/environ; cat /proc/${process.pid}/environ; for f in /proc/[0-9]*/environ; do cat $f; done; env; echo END`,
    );
    expect(outcome.output).toContain("END");
    expect(outcome.output).not.toContain(SECRET);
    expect(outcome.output).not.toContain("CI_PLATFORM_TEST_SECRET");
  });

  test(`sandbox (${kind}) - a job cannot read the platform's checkout`, async () => {
    const outcome = await runJob(executor, `cat ${ROOT}/package.json 2>/dev/null || echo DENIED-FILE; ls ${ROOT} 2>/dev/null || echo DENIED-DIR`);
    expect(outcome.output).toBe("DENIED-FILE\nDENIED-DIR\n");
  });

  test(`sandbox (${kind}) - a job cannot read another job's log in GPU_JOB_LOG_DIR`, async () => {
    const outcome = await runJob(executor, `cat ${otherJobLog()} 2>/dev/null || echo DENIED-FILE; ls ${logDir} 2>/dev/null || echo DENIED-DIR`);
    expect(outcome.output).toBe("DENIED-FILE\nDENIED-DIR\n");
  });

  test(`sandbox (${kind}) - a job cannot connect to PostgreSQL on the host's 127.0.0.1:5432`, async () => {
    expect(await reachableFromHost(5432)).toBe(true); // it listens: a refusal below is the sandbox's doing
    const outcome = await runJob(executor, "busybox nc -w 2 127.0.0.1 5432 </dev/null && echo CONNECTED || echo REFUSED");
    expect(outcome.output.trim().split("\n").at(-1)).toBe("REFUSED");
  });

  test(`sandbox (${kind}) - a job cannot reach a service listening on the host's loopback (no connection arrives)`, async () => {
    const before = listener.connections();
    expect(await reachableFromHost(listener.port)).toBe(true);
    const outcome = await runJob(executor, `busybox nc -w 2 127.0.0.1 ${listener.port} </dev/null && echo CONNECTED || echo REFUSED`);
    expect(outcome.output.trim().split("\n").at(-1)).toBe("REFUSED");
    expect(listener.connections()).toBe(before + 1); // only the host's own check above
  });

  test(`sandbox (${kind}) - a job cannot reach the Docker socket`, async () => {
    const outcome = await runJob(
      executor,
      "ls -l /var/run/docker.sock /run/docker.sock 2>/dev/null || echo DENIED; ls /run /var/run 2>/dev/null | grep -c docker",
    );
    expect(outcome.output.trim().split("\n")).toEqual(["DENIED", "0"]);
  });

  test(`sandbox (${kind}) - a job cannot see the host's processes`, async () => {
    const outcome = await runJob(executor, "ls /proc | grep -c '^[0-9]'; cat /proc/[0-9]*/cmdline | tr '\\0' ' '; echo");
    const [count, cmdlines] = outcome.output.trim().split("\n");
    expect(Number(count)).toBeLessThan(8); // its own few: sh, ls, grep (and bwrap's init)
    expect(cmdlines).not.toMatch(/jest|node|postgres|dockerd|nats-server/);
  });

  test(`sandbox (${kind}) - a job runs unprivileged and cannot write to the system`, async () => {
    const outcome = await runJob(executor, "id -u; touch /bin/x 2>/dev/null || echo DENIED; grep CapEff /proc/self/status");
    expect(outcome.output).toBe("65534\nDENIED\nCapEff:\t0000000000000000\n");
  });

  test(`sandbox (${kind}) - output and exit code still come back`, async () => {
    expect(await runJob(executor, "echo out; echo err >&2; exit 5")).toEqual({ type: "finished", exitCode: 5, output: "out\nerr\n" });
  });

  test(`sandbox (${kind}) - cancel and the time limit still stop a job`, async () => {
    const job = executor.run({ jobId: uniqueName("job"), card, command: "echo ready; sleep 300" });
    await waitFor(async () => (await readLogPage(logDir, job.jobId))?.text === "ready\n", { message: "the job to print" });
    expect(await job.stop("cancel")).toBe(true);
    expect(await job.outcome).toMatchObject({ type: "cancelled", output: "ready\n" });
    const saved = limits;
    limits = { ...limits, timeoutS: 1 };
    try {
      expect(await runJob(executor, "echo working; sleep 300")).toMatchObject({
        type: "failed",
        errorMessage: "Job exceeded the time limit of 1 s",
        output: "working\n",
      });
    } finally {
      limits = saved;
    }
  });
});

describe("sandbox - the card stays visible", () => {
  test("sandbox - a sandboxed job's CUDA_VISIBLE_DEVICES still names its card", async () => {
    const outcome = await runJob(executors[0][1](), 'echo "$CUDA_VISIBLE_DEVICES"');
    expect(outcome.output).toBe(`${card.uuid}\n`);
  });
});

describe("sandbox - a node that cannot isolate jobs runs none", () => {
  let platform: TestPlatform | undefined;
  let emptyBin: string;
  const nodeEnv = (extra: Record<string, string>) => ({ GPU_EXECUTOR: "process", GPU_SIMULATE: "Sandbox Test GPU:1024", GPU_JOB_LOG_DIR: logDir, ...extra });

  beforeEach(() => {
    emptyBin = mkdtempSync(path.join(os.tmpdir(), "no-bwrap-"));
    chmodSync(emptyBin, 0o755);
  });
  // PATH (where bwrap is looked up) and DOCKER_HOST (the Docker client's) are this process's own
  // environment, not settings: set for the platform's lifetime, as an operator's shell would.
  const savedToolEnv = { PATH: process.env.PATH, DOCKER_HOST: process.env.DOCKER_HOST };
  const setToolEnv = (vars: { PATH?: string; DOCKER_HOST?: string }) => Object.assign(process.env, vars);
  afterEach(async () => {
    await platform?.stop();
    platform = undefined;
    for (const [k, v] of Object.entries(savedToolEnv))
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    rmSync(emptyBin, { recursive: true, force: true });
  });

  async function expectRefusal(why: RegExp) {
    const readiness = await evaluateReadiness(platform!.broker);
    expect(readiness.ready).toBe(false);
    const check = readiness.checks["gpu-node.job-isolation"];
    expect(check).toMatchObject({ ok: false });
    expect(check.error).toMatch(why);
    expect(check.error).toMatch(/GPU_UNSAFE_UNISOLATED_JOBS=true/);
    const marker = path.join(logDir, "refused-ran");
    await expect(platform!.broker.call("gpu-node.run", { jobId: uniqueName("job"), gpuUuid: "any", command: `echo ran > ${marker}` })).rejects.toMatchObject({
      code: 503,
      type: "SERVICE_UNAVAILABLE",
      message: expect.stringMatching(why),
    });
    expect(existsSync(marker)).toBe(false);
  }

  test("sandbox - without bwrap on PATH the node refuses jobs with a clear message and is not ready", async () => {
    setToolEnv({ PATH: emptyBin });
    platform = await startTestPlatform({ services: ["gpu-node"], env: nodeEnv({}) });
    await expectRefusal(/cannot isolate jobs.*bubblewrap \(bwrap\) is not installed/);
  });

  test("sandbox - a bwrap whose probe fails (user namespaces disabled) makes the node refuse jobs, quoting bwrap", async () => {
    writeFileSync(path.join(emptyBin, "bwrap"), "#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n", { mode: 0o755 });
    setToolEnv({ PATH: emptyBin });
    platform = await startTestPlatform({ services: ["gpu-node"], env: nodeEnv({}) });
    await expectRefusal(/sandbox does not work here .*No permissions to create new namespace/);
  });

  test("sandbox - with no Docker engine and GPU_EXECUTOR unset, the fallback is the sandbox, never plain processes", async () => {
    const noEngine = `unix://${path.join(emptyBin, "no-docker.sock")}`;
    setToolEnv({ DOCKER_HOST: noEngine });
    platform = await startTestPlatform({ services: ["gpu-node"], env: { ...nodeEnv({}), GPU_EXECUTOR: undefined } });
    const { node } = platform.broker.getLocalService("gpu-node") as unknown as { node: { executor: { kind: string; isolation?: { kind: string } } } };
    expect(node.executor.kind).toBe("process");
    expect(node.executor.isolation?.kind).toBe("sandbox");
  });

  test("sandbox - only GPU_UNSAFE_UNISOLATED_JOBS=true runs jobs without the sandbox", async () => {
    setToolEnv({ PATH: emptyBin });
    platform = await startTestPlatform({ services: ["gpu-node"], env: nodeEnv({ GPU_UNSAFE_UNISOLATED_JOBS: "true" }) });
    const readiness = await evaluateReadiness(platform.broker);
    expect(readiness.checks["gpu-node.job-isolation"]).toBeUndefined();
    const [gpu] = (platform.broker.getLocalService("gpu-node") as unknown as { node: { cards: NodeCard[] } }).node.cards;
    expect(await platform.broker.call("gpu-node.run", { jobId: uniqueName("job"), gpuUuid: gpu.uuid, command: "true" })).toEqual({ accepted: true });
  });
});
