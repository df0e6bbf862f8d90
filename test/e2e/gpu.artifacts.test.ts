/**
 * Artifacts (issue 11, point 8) through the gateway: gateway, auth, gpu-scheduler and a real
 * gpu-node on the Docker executor in one process. Files a job writes under /out come back as a
 * tar from GET /api/gpu/jobs/:id/artifacts (read here with Debian's tar); 404 while there are none;
 * an /out over GPU_JOB_OUT_MAX_MB is not kept and the job's log says so.
 */
import { execFileSync } from "child_process";
import Docker from "dockerode";
import { mkdtempSync, rmSync, writeFileSync } from "fs";
import os from "os";
import path from "path";
import { outVolumeName } from "../../services/gpu-node/docker-executor";
import { http, startTestPlatform, TestPlatform, waitFor, waitForRoute } from "../support/platform";

const TEST_JOB_IMAGE = process.env.TEST_JOB_IMAGE || "ci-platform/test-busybox:latest";
const docker = new Docker();

describe("gpu artifacts - files under /out, served as a tar", () => {
  let platform: TestPlatform;
  let base: string;
  let alice: string;
  let bob: string;
  const work = mkdtempSync(path.join(os.tmpdir(), "gpu-artifacts-"));

  const register = async (name: string) =>
    (
      await http(base, "POST", "/api/auth/register", {
        body: { email: `${name}-${Date.now()}@example.com`, name, password: "correct horse battery" },
      })
    ).body.accessToken as string;
  /** Runs a job to its end; its detail. */
  const runJob = async (command: string) => {
    const created = await http(base, "POST", "/api/gpu/jobs", { token: alice, body: { command } });
    expect(created.status).toBe(201);
    return waitFor(
      async () => {
        const job = (await http(base, "GET", `/api/gpu/jobs/${created.body.id}`, { token: alice })).body;
        return ["completed", "failed", "cancelled"].includes(job.status) ? job : false;
      },
      { timeoutMs: 30_000, intervalMs: 50, message: "the job ended" },
    );
  };
  /** The raw answer (a tar is not text). */
  const artifacts = async (id: string, token = alice) => {
    const res = await fetch(`${base}/api/gpu/jobs/${id}/artifacts`, { headers: { Authorization: `Bearer ${token}` } });
    return { status: res.status, type: res.headers.get("content-type"), bytes: Buffer.from(await res.arrayBuffer()) };
  };
  const tar = (bytes: Buffer, ...args: string[]) => {
    const file = path.join(work, `t-${Date.now()}-${Math.random()}.tar`);
    writeFileSync(file, bytes);
    return execFileSync("tar", [...args, "-f", file], { encoding: "utf8" });
  };

  beforeAll(async () => {
    await docker.getImage(TEST_JOB_IMAGE).inspect(); // never skipped: without the image this fails
    platform = await startTestPlatform({
      services: ["api-gateway", "auth", "gpu-scheduler", "gpu-node"],
      env: {
        GPU_EXECUTOR: "docker",
        GPU_DEFAULT_IMAGE: TEST_JOB_IMAGE,
        GPU_ALLOWED_REGISTRIES: "docker.io",
        GPU_SIMULATE: "Artifacts Test GPU:1024",
        GPU_JOB_MEMORY_MB: "256",
        GPU_JOB_OUT_MAX_MB: "1",
        GPU_HEARTBEAT_S: "0.5",
        GPU_SCHEDULE_TICK_MS: "200",
        GPU_STOP_GRACE_S: "1",
        GPU_JOB_LOG_DIR: path.join(work, "logs"),
      },
    });
    base = platform.baseUrl;
    await waitForRoute(base, "GET", "/api/gpu/status");
    alice = await register("alice");
    bob = await register("bob");
    await waitFor(async () => (await http(base, "GET", "/api/gpu/status", { token: alice })).body?.cluster?.totalGpus === 1, {
      message: "the card announced",
    });
  });

  afterAll(async () => {
    await platform?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  test("gpu artifacts - files and folders written under /out come back as a tar; only the owner gets it; the volume is gone", async () => {
    const job = await runJob("echo model > /out/model.txt; mkdir -p /out/ckpt/e1 && head -c 3000 /dev/zero | tr '\\0' w > /out/ckpt/e1/weights.bin; echo done");
    expect(job).toMatchObject({ status: "completed", result: { exitCode: 0, output: "done\n" } });
    const res = await artifacts(job.id);
    expect(res.status).toBe(200);
    expect(res.type).toBe("application/x-tar");
    const names = tar(res.bytes, "-t").trim().split("\n").sort();
    expect(names).toEqual(["out/", "out/ckpt/", "out/ckpt/e1/", "out/ckpt/e1/weights.bin", "out/model.txt"]);
    expect(tar(res.bytes, "-xO", "out/model.txt")).toBe("model\n");
    expect(tar(res.bytes, "-xO", "out/ckpt/e1/weights.bin")).toBe("w".repeat(3000));
    expect((await artifacts(job.id, bob)).status).toBe(404);
    await expect(docker.getVolume(outVolumeName(job.id)).inspect()).rejects.toMatchObject({ statusCode: 404 });
  });

  test("gpu artifacts - a job that leaves nothing under /out: 404 NOT_FOUND", async () => {
    const job = await runJob("echo nothing kept; touch /tmp/scratch");
    expect(job.status).toBe("completed");
    const res = await http(base, "GET", `/api/gpu/jobs/${job.id}/artifacts`, { token: alice });
    expect(res.status).toBe(404);
    expect(res.body.error.code).toBe("NOT_FOUND");
  });

  test("gpu artifacts - a symlink under /out stays a link: the file it names is not archived", async () => {
    const job = await runJob("ln -s /etc/passwd /out/passwd; ln -s /proc/self/environ /out/env; echo ok > /out/ok");
    const res = await artifacts(job.id);
    expect(res.status).toBe(200);
    const listing = tar(res.bytes, "-tv");
    expect(listing).toMatch(/out\/passwd -> \/etc\/passwd/);
    expect(res.bytes.includes("root:x:0:0")).toBe(false);
  });

  test("gpu artifacts - an /out over GPU_JOB_OUT_MAX_MB is not kept: 404, and the job's log says why", async () => {
    const job = await runJob("for i in 1 2 3; do head -c 600000 /dev/zero > /out/part$i; done; echo wrote");
    expect(job.status).toBe("completed");
    expect((await artifacts(job.id)).status).toBe(404);
    const logs = await http(base, "GET", `/api/gpu/jobs/${job.id}/logs`, { token: alice });
    expect(logs.text).toContain("wrote\n");
    expect(logs.text).toContain("the job's /out held more than 1 MiB (the node's limit, GPU_JOB_OUT_MAX_MB): its artifacts were not kept");
  });

  test("gpu artifacts - one file over GPU_JOB_OUT_MAX_MB: the write fails (RLIMIT_FSIZE) and so does the job", async () => {
    // A writer that is PID 1 of the container gets EFBIG (PID 1 ignores SIGXFSZ); any other is stopped by SIGXFSZ (exit 153).
    const first = await runJob("head -c 2000000 /dev/zero > /out/big");
    expect(first.status).toBe("failed");
    expect(first.result.exitCode).not.toBe(0);
    const child = await runJob("head -c 2000000 /dev/zero > /out/big; exit $?");
    expect(child).toMatchObject({ status: "failed", result: { exitCode: 153 } });
  });
});
