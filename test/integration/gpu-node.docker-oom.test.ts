/**
 * A job container the kernel killed for memory, against the real engine and the locally built
 * test image (networking off): it fails with the out-of-memory message, as a process job does,
 * while a job that kills itself with SIGKILL (the same exit code, 137) still just finished.
 */
import Docker from "dockerode";
import { mkdtempSync, rmSync } from "fs";
import os from "os";
import path from "path";
import { DockerExecutor } from "../../services/gpu-node/docker-executor";
import type { JobLimits } from "../../services/gpu-node/job";
import { removeContainersOf, requireEngineAndImage, simulatedCard, TEST_JOB_IMAGE } from "../support/docker";
import { uniqueName } from "../support/platform";

const docker = new Docker();
const namespace = uniqueName("dockeroom");
const card = simulatedCard("GPU-sim-oom-0");
let logDir: string;

const executor = () =>
  new DockerExecutor(
    docker,
    () => ({
      nodeId: "node-oom",
      namespace,
      defaultImage: TEST_JOB_IMAGE,
      limits: { memoryMb: 64, cpus: 1, pids: 64, network: "none" },
      allowedRegistries: ["docker.io"],
    }),
    (): JobLimits => ({ timeoutS: 60, graceS: 1, logDir }),
  );
const run = (command: string) => executor().run({ jobId: uniqueName("job"), card, command });

beforeAll(async () => {
  await requireEngineAndImage(docker);
  logDir = mkdtempSync(path.join(os.tmpdir(), "gpu-node-docker-oom-"));
});

afterAll(async () => {
  await removeContainersOf(docker, namespace);
  rmSync(logDir, { recursive: true, force: true });
});

describe("gpu-node docker executor - out of memory", () => {
  test("gpu-node docker executor - a job holding 200 MiB under GPU_JOB_MEMORY_MB=64 fails with the out-of-memory message", async () => {
    // tail keeps its input's last lines in memory: a stream without newlines, all of it.
    const job = run("echo allocating; head -c 200m /dev/zero | tail; echo survived");
    expect(await job.started).toBe(true);
    const { output, ...outcome } = (await job.outcome)!;
    // The kernel kills tail or the shell (exit 137 or 0): failed either way, as a process job; on main "finished".
    expect(outcome).toMatchObject({ type: "failed", errorMessage: expect.stringMatching(/^The job ran out of memory: .*64 MiB/) });
    expect(output).toContain("allocating");
  }, 60_000);

  test("gpu-node docker executor - a job that SIGKILLs itself (exit 137, no memory kill) has finished", async () => {
    // A child shell: the container's init (pid 1) ignores even SIGKILL from inside.
    const job = run("echo bye; sh -c 'kill -9 $$'; exit $?");
    expect(await job.started).toBe(true);
    expect(await job.outcome).toMatchObject({ type: "finished", exitCode: 137, output: expect.stringMatching(/^bye\n/) });
  }, 60_000);
});
