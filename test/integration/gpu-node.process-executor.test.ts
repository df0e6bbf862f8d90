/**
 * The process executor with real bubblewrap sandboxes, shells and process groups (and once
 * unisolated, as GPU_UNSAFE_UNISOLATED_JOBS runs it). Hostile jobs: test/security/sandbox.test.ts.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "fs";
import os from "os";
import path from "path";
import type { JobLimits } from "../../services/gpu-node/job";
import { readLogPage } from "../../services/gpu-node/log-store";
import { ProcessExecutor, ProcessIsolation, probeSandbox } from "../../services/gpu-node/process-executor";
import { simulatedCard } from "../support/docker";
import { uniqueName, waitFor } from "../support/platform";
import { hostPidsRunning, testSandbox } from "../support/sandbox";

const card = simulatedCard("GPU-sim-test-0");

/** A sleep no other process on the machine runs: its host pids are the job's. */
const uniqueSleep = () => String(300_000 + Math.floor(Math.random() * 600_000));

describe.each([
  ["sandboxed", () => testSandbox()],
  ["unisolated", (): ProcessIsolation => ({ kind: "unisolated" })],
])("gpu-node process executor (%s)", (mode, isolation) => {
  let logDir: string;
  let limits: JobLimits;
  let executor: ProcessExecutor;
  const run = (command: string) => executor.run({ jobId: uniqueName("job"), card, command });

  beforeEach(() => {
    logDir = mkdtempSync(path.join(os.tmpdir(), "gpu-node-proc-"));
    limits = { timeoutS: 30, graceS: 1, logDir };
    executor = new ProcessExecutor(() => limits, isolation());
  });
  afterEach(() => rmSync(logDir, { recursive: true, force: true }));

  test(`gpu-node process executor (${mode}) - stdout and stderr in the order written, exit code 0`, async () => {
    const job = run("echo one; echo two >&2; echo three");
    expect(await job.started).toBe(true);
    expect(await job.outcome).toEqual({ type: "finished", exitCode: 0, output: "one\ntwo\nthree\n" });
    expect((await readLogPage(logDir, job.jobId))!.text).toBe("one\ntwo\nthree\n");
  });

  test.each([
    ["exit 3", 3],
    ["false", 1],
    ["kill -9 $$", 137],
    ["no-such-command-here", 127],
  ])(`gpu-node process executor (${mode}) - \`%s\` ends with exit code %i`, async (command, exitCode) => {
    expect(await run(command).outcome).toMatchObject({ type: "finished", exitCode });
  });

  if (mode === "sandboxed")
    test("gpu-node process executor (sandboxed) - every job sees the same minimal /etc/passwd and /etc/group, and cannot change them", async () => {
      const read = "cat /etc/passwd /etc/group; (echo x >> /etc/passwd) 2>/dev/null && echo WROTE; echo end";
      const [first, second] = await Promise.all([run(read).outcome, run(read).outcome]);
      const expected = "root:x:0:0:root:/root:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/tmp:/bin/sh\nroot:x:0:\nnogroup:x:65534:\nend\n";
      expect(first).toEqual({ type: "finished", exitCode: 0, output: expected });
      expect(second).toEqual(first);
    });

  test(`gpu-node process executor (${mode}) - env has CUDA_VISIBLE_DEVICES and nothing of the node's own, no NVIDIA_*`, async () => {
    process.env.NVIDIA_VISIBLE_DEVICES = "all";
    process.env.GPU_NODE_SECRET_FOR_TEST = "must-not-leak";
    try {
      const outcome = await run("env").outcome;
      expect(outcome?.type).toBe("finished");
      const env = Object.fromEntries(
        outcome!.output
          .trim()
          .split("\n")
          .map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)]),
      );
      expect(env.CUDA_VISIBLE_DEVICES).toBe(card.uuid);
      expect(Object.keys(env).filter((k) => k.startsWith("NVIDIA_"))).toEqual([]);
      expect(env.GPU_NODE_SECRET_FOR_TEST).toBeUndefined();
      // Sandboxed: a private tmpfs at /tmp, as in a container; unisolated: a fresh folder of its own.
      expect(env.HOME).toMatch(mode === "sandboxed" ? /^\/tmp$/ : /ci-job-/);
    } finally {
      delete process.env.NVIDIA_VISIBLE_DEVICES;
      delete process.env.GPU_NODE_SECRET_FOR_TEST;
    }
  });

  test(`gpu-node process executor (${mode}) - the job's env reaches it, and no host command line shows a value`, async () => {
    const secret = `tok-${uniqueSleep()}`;
    const sleep = uniqueSleep();
    const job = executor.run({ jobId: uniqueName("job"), card, command: `echo "$API_TOKEN"; sleep ${sleep}`, env: { API_TOKEN: secret } });
    expect(await job.started).toBe(true);
    await waitFor(() => hostPidsRunning(["sleep", sleep]).length > 0, { message: "the job's sleep on the host" });
    // /proc/<pid>/cmdline is readable by every user of the host: a value there is a leak.
    const leaking = readdirSync("/proc")
      .filter((pid) => /^\d+$/.test(pid))
      .filter((pid) => {
        try {
          return readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(secret);
        } catch {
          return false; // ended meanwhile
        }
      });
    expect(leaking).toEqual([]);
    expect(await job.stop("cancel")).toBe(true);
    expect((await job.outcome)?.output).toBe(`${secret}\n`);
  });

  test(`gpu-node process executor (${mode}) - cancel kills every process of the job, even children ignoring SIGTERM`, async () => {
    const [bg, fg] = [uniqueSleep(), uniqueSleep()];
    // A background child that ignores SIGTERM, and a foreground sleep.
    const job = run(`(trap '' TERM; sleep ${bg}) & echo running; sleep ${fg}`);
    expect(await job.started).toBe(true);
    const pids = await waitFor(
      () => {
        const found = [...hostPidsRunning(["sleep", bg]), ...hostPidsRunning(["sleep", fg])];
        return found.length === 2 ? found : false;
      },
      { message: "the job's two sleeps on the host" },
    );
    expect(await job.stop("cancel")).toBe(true);
    const outcome = await job.outcome;
    expect(outcome).toMatchObject({ type: "cancelled", output: "running\n" });
    expect(pids).toHaveLength(2);
    await waitFor(() => hostPidsRunning(["sleep", bg]).length + hostPidsRunning(["sleep", fg]).length === 0, {
      timeoutMs: 5000,
      message: "every process of the job to be gone",
    });
    expect(await job.stop("cancel")).toBe(false); // already ended
  });

  test(`gpu-node process executor (${mode}) - SIGTERM reaches the job first: a trap runs within the grace period`, async () => {
    limits = { ...limits, graceS: 5 };
    const job = run("trap 'echo got-term; exit 0' TERM; echo ready; while :; do sleep 0.1; done");
    await waitFor(async () => (await readLogPage(logDir, job.jobId))?.text.includes("ready"), { message: "the job to run" });
    const stopping = Date.now();
    await job.stop("cancel");
    const outcome = await job.outcome;
    expect(outcome).toMatchObject({ type: "cancelled" });
    expect(outcome!.output).toMatch(/^ready\n(Terminated\n)?got-term\n$/); // the shell may report its killed sleep
    expect(Date.now() - stopping).toBeLessThan(4000); // ended by its trap, not by the SIGKILL after 5 s
  });

  test(`gpu-node process executor (${mode}) - background processes left behind end with the job`, async () => {
    const bg = uniqueSleep();
    const outcome = await run(`sleep ${bg} & echo done`).outcome;
    expect(outcome).toMatchObject({ type: "finished", exitCode: 0, output: "done\n" });
    await waitFor(() => hostPidsRunning(["sleep", bg]).length === 0, { timeoutMs: 5000, message: "the background sleep to be killed" });
  });

  test(`gpu-node process executor (${mode}) - the time limit stops and fails the job`, async () => {
    limits = { ...limits, timeoutS: 0.5 };
    const started = Date.now();
    const outcome = await run("echo working; sleep 300").outcome;
    expect(outcome).toMatchObject({ type: "failed", errorMessage: "Job exceeded the time limit of 0.5 s", output: "working\n" });
    expect(Date.now() - started).toBeLessThan(5000);
  });
});

describe("gpu-node process executor - sandbox probe and limits", () => {
  test("gpu-node process executor - seen from the host, a sandboxed job runs as uid/gid 65534, not as the node's user", async () => {
    const logDir = mkdtempSync(path.join(os.tmpdir(), "gpu-node-proc-"));
    try {
      const executor = new ProcessExecutor(() => ({ timeoutS: 30, graceS: 1, logDir }), testSandbox());
      const marker = String(300_000 + Math.floor(Math.random() * 600_000));
      const job = executor.run({ jobId: uniqueName("job"), card, command: `sleep ${marker}` });
      const [pid] = await waitFor(() => hostPidsRunning(["sleep", marker]).length > 0 && hostPidsRunning(["sleep", marker]), { message: "the job's sleep" });
      try {
        const field = (name: string) => new RegExp(`^${name}:[ \t]*(.*)$`, "m").exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1].trim();
        expect(field("Uid").split(/\s+/)).toEqual(["65534", "65534", "65534", "65534"]);
        expect(field("Gid").split(/\s+/)).toEqual(["65534", "65534", "65534", "65534"]);
        expect(field("Groups")).toBe(""); // the node's supplementary groups are dropped too
      } finally {
        await job.stop("cancel");
      }
      expect(await job.outcome).toMatchObject({ type: "cancelled" });
    } finally {
      rmSync(logDir, { recursive: true, force: true });
    }
  });

  test("gpu-node process executor - the probe passes with a working bwrap and names the failure of a broken one", async () => {
    expect(await probeSandbox(testSandbox())).toBeNull();
    expect(await probeSandbox(testSandbox({ bwrap: "/bin/false" }))).toMatch(/^\/bin\/false failed \(exit 1\)/);
    expect(await probeSandbox(testSandbox({ bwrap: "/nonexistent/bwrap" }))).toMatch(/could not be started/);
  });

  test("gpu-node process executor - the sandbox's /dev/shm is a writable tmpfs of GPU_JOB_SHM_MB", async () => {
    const logDir = mkdtempSync(path.join(os.tmpdir(), "gpu-node-proc-"));
    try {
      const sandbox = testSandbox();
      const executor = new ProcessExecutor(() => ({ timeoutS: 30, graceS: 1, logDir }), testSandbox({ limits: { ...sandbox.limits, shmBytes: 24 << 20 } }));
      const command =
        "stat -f -c '%b %S' /dev/shm; echo x > /dev/shm/w && cat /dev/shm/w; dd if=/dev/zero of=/dev/shm/fill bs=1M count=32 2>/dev/null || echo shm-full";
      const outcome = await executor.run({ jobId: uniqueName("job"), card, command }).outcome;
      expect(outcome).toMatchObject({ type: "finished", exitCode: 0 });
      const [size, written, full] = outcome!.output.trim().split("\n");
      const [blocks, blockSize] = size.split(" ").map(Number);
      expect([blocks * blockSize, written, full]).toEqual([24 << 20, "x", "shm-full"]);
    } finally {
      rmSync(logDir, { recursive: true, force: true });
    }
  });

  test("gpu-node process executor - inside the sandbox: the job's uid, no capabilities, a bounded private /tmp, process limit", async () => {
    const logDir = mkdtempSync(path.join(os.tmpdir(), "gpu-node-proc-"));
    try {
      const executor = new ProcessExecutor(
        () => ({ timeoutS: 30, graceS: 1, logDir }),
        testSandbox({ limits: { processes: 16, memoryBytes: 256 << 20, tmpBytes: 8 << 20 } }),
      );
      const outcome = await executor.run({
        jobId: uniqueName("job"),
        card,
        command: [
          "id -u; id -g; pwd; hostname",
          "grep -E '^(CapEff|NoNewPrivs)' /proc/self/status",
          "touch /usr/x 2>/dev/null || echo usr-read-only",
          "dd if=/dev/zero of=/tmp/fill bs=1M count=16 2>/dev/null || echo tmp-full",
          "prlimit --nproc --data --noheadings --output SOFT",
          "unshare -U -r true 2>/dev/null || echo no-nested-userns",
        ].join("; "),
      }).outcome;
      expect(outcome).toMatchObject({ type: "finished", exitCode: 0 });
      expect(
        outcome!.output
          .trim()
          .split("\n")
          .map((l) => l.trim()),
      ).toEqual([
        "65534",
        "65534",
        "/tmp",
        "ci-job",
        "CapEff:\t0000000000000000",
        "NoNewPrivs:\t1",
        "usr-read-only",
        "tmp-full",
        "16",
        String(256 << 20),
        "no-nested-userns",
      ]);
    } finally {
      rmSync(logDir, { recursive: true, force: true });
    }
  });
});
