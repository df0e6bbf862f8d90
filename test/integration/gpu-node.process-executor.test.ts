/** The process executor with real shells and process groups. */
import { mkdtempSync, readFileSync, rmSync } from "fs";
import os from "os";
import path from "path";
import type { NodeCard } from "../../services/gpu-node/discovery";
import type { JobLimits } from "../../services/gpu-node/job";
import { readLogPage } from "../../services/gpu-node/output";
import { ProcessExecutor } from "../../services/gpu-node/process-executor";
import { uniqueName, waitFor } from "../support/platform";

const card: NodeCard = { uuid: "GPU-sim-test-0", index: 0, name: "Test GPU", memoryTotal: 1024, memoryUsed: 0, utilization: 0, temperature: 30, simulated: true };

/** Running, not a zombie waiting for its reaper (Linux /proc). */
const alive = (pid: number) => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    return false;
  }
};

describe("gpu-node process executor", () => {
  let logDir: string;
  let limits: JobLimits;
  let executor: ProcessExecutor;
  const run = (command: string) => executor.run({ jobId: uniqueName("job"), card, command });

  beforeEach(() => {
    logDir = mkdtempSync(path.join(os.tmpdir(), "gpu-node-proc-"));
    limits = { timeoutS: 30, graceS: 1, logDir };
    executor = new ProcessExecutor(() => limits);
  });
  afterEach(() => rmSync(logDir, { recursive: true, force: true }));

  test("gpu-node process executor - stdout and stderr in the order written, exit code 0", async () => {
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
  ])("gpu-node process executor - `%s` ends with exit code %i", async (command, exitCode) => {
    expect(await run(command).outcome).toMatchObject({ type: "finished", exitCode });
  });

  test("gpu-node process executor - env has CUDA_VISIBLE_DEVICES and nothing of the node's own, no NVIDIA_*", async () => {
    process.env.NVIDIA_VISIBLE_DEVICES = "all";
    process.env.GPU_NODE_SECRET_FOR_TEST = "must-not-leak";
    try {
      const outcome = await run("env").outcome;
      expect(outcome?.type).toBe("finished");
      const env = Object.fromEntries(outcome!.output.trim().split("\n").map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)]));
      expect(env.CUDA_VISIBLE_DEVICES).toBe(card.uuid);
      expect(Object.keys(env).filter((k) => k.startsWith("NVIDIA_"))).toEqual([]);
      expect(env.GPU_NODE_SECRET_FOR_TEST).toBeUndefined();
      expect(env.HOME).toMatch(/ci-job-/);
    } finally {
      delete process.env.NVIDIA_VISIBLE_DEVICES;
      delete process.env.GPU_NODE_SECRET_FOR_TEST;
    }
  });

  test("gpu-node process executor - cancel kills the whole process group, even children ignoring SIGTERM", async () => {
    const pidFile = path.join(logDir, "pids");
    // A background child that ignores SIGTERM, and a foreground sleep.
    const job = run(`(trap '' TERM; sleep 300) & echo $! > ${pidFile}; echo $$ >> ${pidFile}; echo running; sleep 300`);
    expect(await job.started).toBe(true);
    const pids = await waitFor(
      () => {
        try {
          const list = readFileSync(pidFile, "utf8").trim().split("\n").map(Number);
          return list.length === 2 ? list : false;
        } catch {
          return false;
        }
      },
      { message: "the job's pids" },
    );
    expect(pids.every(alive)).toBe(true);
    expect(await job.stop("cancel")).toBe(true);
    const outcome = await job.outcome;
    expect(outcome).toMatchObject({ type: "cancelled", output: "running\n" });
    await waitFor(() => pids.every((pid) => !alive(pid)), { timeoutMs: 5000, message: "every process of the group to be gone" });
    expect(await job.stop("cancel")).toBe(false); // already ended
  });

  test("gpu-node process executor - background processes left behind end with the job", async () => {
    const pidFile = path.join(logDir, "bg");
    const outcome = await run(`sleep 300 & echo $! > ${pidFile}; echo done`).outcome;
    expect(outcome).toMatchObject({ type: "finished", exitCode: 0, output: "done\n" });
    const pid = Number(readFileSync(pidFile, "utf8"));
    await waitFor(() => !alive(pid), { timeoutMs: 5000, message: "the background sleep to be killed" });
  });

  test("gpu-node process executor - the time limit stops and fails the job", async () => {
    limits = { ...limits, timeoutS: 0.5 };
    const started = Date.now();
    const outcome = await run("echo working; sleep 300").outcome;
    expect(outcome).toMatchObject({ type: "failed", errorMessage: "Job exceeded the time limit of 0.5 s", output: "working\n" });
    expect(Date.now() - started).toBeLessThan(5000);
  });
});
