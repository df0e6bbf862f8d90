/**
 * Artifacts of sandboxed process jobs: the job's /out is a host folder of its own, packed by the
 * node when the job ends (regular files and folders only, never through a symlink), bounded by
 * GPU_JOB_OUT_MAX_MB. The tar is read with Debian's tar and with the node's own reader. Also: a
 * Docker job that ended while no node watched keeps its /out (archived when it is adopted).
 */
import { execFileSync } from "child_process";
import Docker from "dockerode";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "fs";
import os from "os";
import path from "path";
import { artifactPath, tarEntryNames } from "../../services/gpu-node/artifacts";
import type { NodeCard } from "../../services/gpu-node/discovery";
import type { JobLimits } from "../../services/gpu-node/job";
import { readLogPage } from "../../services/gpu-node/log-store";
import { DockerExecutor, LABEL_JOB, outVolumeName } from "../../services/gpu-node/docker-executor";
import { ProcessExecutor } from "../../services/gpu-node/process-executor";
import { uniqueName, waitFor } from "../support/platform";
import { testSandbox } from "../support/sandbox";

const card: NodeCard = { uuid: "GPU-sim-artifacts", index: 0, name: "Sim", memoryTotal: 1024, memoryUsed: 0, utilization: 0, temperature: 30, simulated: true };
const MiB = 1024 * 1024;
const TEST_JOB_IMAGE = process.env.TEST_JOB_IMAGE || "ci-platform/test-busybox:latest";

describe("gpu-node artifacts - sandboxed process jobs", () => {
  let logDir: string;
  let limits: JobLimits;
  const run = (command: string) => new ProcessExecutor(() => limits, testSandbox()).run({ jobId: uniqueName("job"), card, command });

  beforeEach(() => {
    logDir = mkdtempSync(path.join(os.tmpdir(), "gpu-node-artifacts-"));
    limits = { timeoutS: 30, graceS: 1, logDir, outMaxBytes: MiB };
  });
  afterEach(() => rmSync(logDir, { recursive: true, force: true }));

  test("gpu-node artifacts - files and folders under /out are packed as out/…; the job's folder is removed", async () => {
    const job = run("echo model > /out/model.txt; mkdir -p /out/ckpt/e1; head -c 3000 /dev/zero > /out/ckpt/e1/w.bin; mkdir /out/empty; echo done");
    expect(await job.outcome).toMatchObject({ type: "finished", exitCode: 0, output: "done\n" });
    const tar = artifactPath(logDir, job.jobId);
    const listed = execFileSync("tar", ["-tf", tar], { encoding: "utf8" }).trim().split("\n").sort();
    expect(listed).toEqual(["out/", "out/ckpt/", "out/ckpt/e1/", "out/ckpt/e1/w.bin", "out/empty/", "out/model.txt"]);
    expect((await tarEntryNames(tar)).sort()).toEqual(listed);
    expect(execFileSync("tar", ["-xOf", tar, "out/model.txt"], { encoding: "utf8" })).toBe("model\n");
    expect(execFileSync("tar", ["-xOf", tar, "out/ckpt/e1/w.bin"]).length).toBe(3000);
    // A sandboxed job's work folder is its /out: none is left holding the job's file.
    expect(readdirSync(os.tmpdir()).filter((n) => n.startsWith("ci-job-") && existsSync(path.join(os.tmpdir(), n, "model.txt")))).toEqual([]);
  });

  test("gpu-node artifacts - a long path survives (PAX header)", async () => {
    const deep = Array.from({ length: 8 }, (_, i) => `folder-number-${i}`).join("/");
    const job = run(`mkdir -p /out/${deep} && echo deep > /out/${deep}/file-with-a-long-name.txt`);
    expect(await job.outcome).toMatchObject({ type: "finished", exitCode: 0 });
    const tar = artifactPath(logDir, job.jobId);
    expect(execFileSync("tar", ["-xOf", tar, `out/${deep}/file-with-a-long-name.txt`], { encoding: "utf8" })).toBe("deep\n");
    expect(await tarEntryNames(tar)).toContain(`out/${deep}/file-with-a-long-name.txt`);
  });

  test("gpu-node artifacts - a hostile job's symlinks and fifos under /out bring no host file into the tar", async () => {
    const hostPasswd = readFileSync("/etc/passwd", "utf8");
    const job = run(
      ["ln -s /etc/passwd /out/passwd", "ln -s /etc /out/etc", "ln -s ../../../../../../etc/passwd /out/up", "mkfifo /out/fifo", "echo ok > /out/ok"].join(
        "; ",
      ),
    );
    expect(await job.outcome).toMatchObject({ type: "finished", exitCode: 0 });
    const tar = artifactPath(logDir, job.jobId);
    expect((await tarEntryNames(tar)).sort()).toEqual(["out/", "out/ok"]);
    const bytes = readFileSync(tar);
    for (const line of hostPasswd.split("\n").filter((l) => l.includes(":"))) expect(bytes.includes(line)).toBe(false);
  });

  test("gpu-node artifacts - nothing under /out: no tar", async () => {
    const job = run("echo nothing; touch /tmp/scratch");
    expect(await job.outcome).toMatchObject({ type: "finished", exitCode: 0 });
    expect(existsSync(artifactPath(logDir, job.jobId))).toBe(false);
  });

  test("gpu-node artifacts - /out over GPU_JOB_OUT_MAX_MB: not kept, the log says so; one file over it: the write fails", async () => {
    const over = run("for i in 1 2 3; do head -c 600000 /dev/zero > /out/part$i; done; echo wrote");
    expect(await over.outcome).toMatchObject({ type: "finished", exitCode: 0 });
    expect(existsSync(artifactPath(logDir, over.jobId))).toBe(false);
    const log = (await readLogPage(logDir, over.jobId))!.text;
    expect(log).toContain("wrote\n");
    expect(log).toContain("[ci-platform: the job's /out held more than 1 MiB (the node's limit, GPU_JOB_OUT_MAX_MB): its artifacts were not kept]");
    const big = run("head -c 2000000 /dev/zero > /out/big; echo $?");
    const outcome = await big.outcome;
    expect(outcome).toMatchObject({ type: "finished", exitCode: 0 });
    expect(outcome!.output.trim().split("\n").pop()).toBe("153"); // SIGXFSZ (RLIMIT_FSIZE)
  });
});

describe("gpu-node artifacts - Docker jobs adopted after a node restart", () => {
  const docker = new Docker();
  const namespace = uniqueName("artifacts");
  let logDir: string;
  const limits = (): JobLimits => ({ timeoutS: 30, graceS: 1, logDir, outMaxBytes: MiB });
  const executor = () =>
    new DockerExecutor(
      docker,
      () => ({
        nodeId: "node-art",
        namespace,
        defaultImage: TEST_JOB_IMAGE,
        limits: { memoryMb: 256, cpus: 1, pids: 64, network: "none" },
        allowedRegistries: ["docker.io"],
      }),
      limits,
    );

  beforeAll(async () => {
    await docker.getImage(TEST_JOB_IMAGE).inspect(); // never skipped: without the image this fails
    logDir = mkdtempSync(path.join(os.tmpdir(), "gpu-node-artifacts-docker-"));
  });
  afterAll(() => rmSync(logDir, { recursive: true, force: true }));

  test("gpu-node artifacts - a job that ended while no node watched still has its /out kept; container and volume go", async () => {
    const job = executor().run({ jobId: uniqueName("job"), card, command: "echo kept > /out/result.txt" });
    expect(await job.started).toBe(true);
    job.detach(); // the node goes away, the container runs on and ends
    await waitFor(
      async () => {
        const [c] = await docker.listContainers({ all: true, filters: { label: [`${LABEL_JOB}=${job.jobId}`] } });
        return c?.State === "exited";
      },
      { message: "the job to end while no node watches" },
    );
    const [adopted] = await executor().adopt([card.uuid]);
    expect(adopted.jobId).toBe(job.jobId);
    expect(await adopted.outcome).toMatchObject({ type: "finished", exitCode: 0 });
    expect(execFileSync("tar", ["-xOf", artifactPath(logDir, job.jobId), "out/result.txt"], { encoding: "utf8" })).toBe("kept\n");
    await expect(docker.getVolume(outVolumeName(job.jobId)).inspect()).rejects.toMatchObject({ statusCode: 404 });
  });
});
