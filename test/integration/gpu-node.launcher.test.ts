/**
 * The resident job launcher (services/gpu-node/launcher.ts) with real processes and bubblewrap:
 * jobs are forked by the helper, never by the node; a job inherits no descriptor of the helper
 * and nothing of the node's environment; a forged output token is refused; a helper that dies
 * ends its jobs and the next launch starts a new one.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from "fs";
import net from "net";
import os from "os";
import path from "path";
import type { JobLimits } from "../../services/gpu-node/job";
import { sharedLauncher } from "../../services/gpu-node/launcher";
import { descendantPids, ProcessExecutor, ProcessIsolation } from "../../services/gpu-node/process-executor";
import { uniqueName, waitFor } from "../support/platform";
import { simulatedCard, testSandbox } from "../support/sandbox";

const card = simulatedCard("GPU-sim-launch-0");

/** Direct children of `pid` (host view). */
function childrenOf(pid: number): number[] {
  const text = (() => {
    try {
      return readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8");
    } catch {
      return "";
    }
  })();
  return text.split(/\s+/).filter(Boolean).map(Number);
}

describe.each([
  ["sandboxed", () => testSandbox()],
  ["unisolated", (): ProcessIsolation => ({ kind: "unisolated" })],
])("gpu-node launcher (%s)", (mode, isolation) => {
  let logDir: string;
  let executor: ProcessExecutor;
  const run = (command: string) => executor.run({ jobId: uniqueName("job"), card, command });

  beforeEach(() => {
    logDir = mkdtempSync(path.join(os.tmpdir(), "gpu-node-launch-"));
    const limits: JobLimits = { timeoutS: 30, graceS: 1, logDir };
    executor = new ProcessExecutor(() => limits, isolation());
  });
  afterEach(() => rmSync(logDir, { recursive: true, force: true }));

  test(`gpu-node launcher (${mode}) - the job's descriptors are /dev/null and its output socket, nothing of the helper or the node`, async () => {
    const outcome = await run("ls -l /proc/$$/fd/").outcome;
    expect(outcome?.type).toBe("finished");
    const fds = Object.fromEntries([...outcome!.output.matchAll(/ (\d+) -> (\S+)/g)].map((m) => [m[1], m[2].replace(/\[\d+\]/, "")]));
    expect(fds).toEqual({ "0": "/dev/null", "1": "socket:", "2": "socket:" });
  });

  test(`gpu-node launcher (${mode}) - the helper forks the job, the node does not; the helper has no environment`, async () => {
    const sleep = String(400_000 + Math.floor(Math.random() * 500_000));
    const job = run(`sleep ${sleep}`);
    expect(await job.started).toBe(true);
    const helper = sharedLauncher().pid!;
    expect(childrenOf(process.pid)).toContain(helper);
    const sleeping = await waitFor(async () =>
      (await descendantPids(helper)).find((pid) => readFileSync(`/proc/${pid}/cmdline`, "utf8") === `sleep\0${sleep}\0`),
    );
    expect(await descendantPids(helper)).toContain(sleeping);
    // nothing but the helper (and tools the test itself runs) is a child of this process
    expect(childrenOf(process.pid).filter((pid) => pid !== helper && readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(sleep))).toEqual([]);
    expect(readFileSync(`/proc/${helper}/environ`, "utf8")).toBe("");
    await job.stop("cancel");
    expect((await job.outcome)?.type).toBe("cancelled");
  });
});

describe("gpu-node launcher - abuse and failure", () => {
  let logDir: string;
  beforeEach(() => (logDir = mkdtempSync(path.join(os.tmpdir(), "gpu-node-launch-"))));
  afterEach(() => rmSync(logDir, { recursive: true, force: true }));

  test("gpu-node launcher - a cgroup that cannot be entered fails the launch and runs nothing; the helper goes on", async () => {
    const launcher = sharedLauncher();
    const helper = await launcher.helperPid();
    const marker = path.join(logDir, "ran");
    const request = { file: "/bin/sh", args: ["-c", `echo > ${marker}`], env: {}, cwd: "/", joinStderr: true };
    const missing = path.join(logDir, "no-such-cgroup", "cgroup.procs");
    await expect(launcher.launch({ ...request, cgroup: { enter: [missing], home: [] } })).rejects.toThrow(/the job's cgroup could not be entered/);
    expect(existsSync(marker)).toBe(false);
    expect(launcher.pid).toBe(helper);
    const launched = await launcher.launch(request);
    expect(await launched.exit).toEqual({ code: 0, signal: null });
    launched.output.destroy();
    expect(existsSync(marker)).toBe(true);
  });

  test("gpu-node launcher - a connection with a forged token is closed and never becomes a job's output", async () => {
    const launcher = sharedLauncher();
    const outcome = await new ProcessExecutor(() => ({ timeoutS: 30, graceS: 1, logDir }), testSandbox()).run({
      jobId: uniqueName("job"),
      card,
      command: "echo real",
    }).outcome;
    expect(outcome).toMatchObject({ type: "finished", exitCode: 0, output: "real\n" });
    const forged = net.connect(launcher.socket!);
    forged.write(`${"0".repeat(32)}\nfake output\n`);
    await new Promise<void>((resolve) => forged.once("close", () => resolve()).resume());
    expect(forged.destroyed).toBe(true);
  });

  test("gpu-node launcher - a helper that dies ends its sandboxed jobs (137) and the next launch starts a new helper", async () => {
    const executor = new ProcessExecutor(() => ({ timeoutS: 30, graceS: 1, logDir }), testSandbox());
    const job = executor.run({ jobId: uniqueName("job"), card, command: "sleep 600" });
    expect(await job.started).toBe(true);
    const helper = sharedLauncher().pid!;
    process.kill(helper, "SIGKILL");
    expect(await job.outcome).toMatchObject({ type: "finished", exitCode: 137 });
    const next = await executor.run({ jobId: uniqueName("job"), card, command: "echo again" }).outcome;
    expect(next).toMatchObject({ type: "finished", exitCode: 0, output: "again\n" });
    expect(sharedLauncher().pid).not.toBe(helper);
  });
});
