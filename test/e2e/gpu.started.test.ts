/**
 * When a job starts (issue 11): through the gateway, with gateway, auth, gpu-scheduler and a real
 * gpu-node on the Docker executor in one process. `startedAt` and GPU seconds begin when the
 * container really starts, not when the node takes the job; a job whose image cannot be pulled
 * never starts. No registry is reachable here: 127.0.0.1:9 refuses at once, and a listener that
 * accepts and never answers holds a pull open for as long as the test needs.
 */
import Docker from "dockerode";
import { mkdtempSync, rmSync } from "fs";
import net from "net";
import os from "os";
import path from "path";
import { newPool } from "../../lib/db";
import { LABEL_JOB } from "../../services/gpu-node/docker-executor";
import { http, startTestPlatform, TestPlatform, waitFor, waitForRoute } from "../support/platform";

const TEST_JOB_IMAGE = process.env.TEST_JOB_IMAGE || "ci-platform/test-busybox:latest";
const docker = new Docker();

describe("gpu started - startedAt and GPU seconds begin when the container starts", () => {
  let platform: TestPlatform;
  let base: string;
  let token: string;
  const logDir = mkdtempSync(path.join(os.tmpdir(), "gpu-started-"));
  /** A registry that accepts connections and never answers: pulls from it hang until released. */
  const sockets = new Set<net.Socket>();
  let stalls = 0;
  const stalling = net.createServer((socket) => {
    stalls++;
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
  });
  let stallingPort = 0;

  const submit = (body: unknown) => http(base, "POST", "/api/gpu/jobs", { token, body });
  const detail = async (id: string) => (await http(base, "GET", `/api/gpu/jobs/${id}`, { token })).body;
  const until = (id: string, accept: (job: any) => boolean, message: string, timeoutMs = 30_000) =>
    waitFor(async () => ((job) => (accept(job) ? job : false))(await detail(id)), { timeoutMs, intervalMs: 50, message });

  beforeAll(async () => {
    await docker.getImage(TEST_JOB_IMAGE).inspect(); // never skipped: without the image this fails
    await new Promise<void>((resolve) => stalling.listen(0, "127.0.0.1", resolve));
    stallingPort = (stalling.address() as net.AddressInfo).port;
    platform = await startTestPlatform({
      services: ["api-gateway", "auth", "gpu-scheduler", "gpu-node"],
      env: {
        GPU_EXECUTOR: "docker",
        GPU_DEFAULT_IMAGE: TEST_JOB_IMAGE,
        // The local test image reads as docker.io; the two loopback registries are test-only.
        GPU_ALLOWED_REGISTRIES: `docker.io,127.0.0.1:9,127.0.0.1:${stallingPort}`,
        GPU_SIMULATE: "Started Test GPU:1024",
        GPU_JOB_MEMORY_MB: "256",
        GPU_HEARTBEAT_S: "0.5",
        GPU_SCHEDULE_TICK_MS: "200",
        GPU_STOP_GRACE_S: "1",
        GPU_JOB_LOG_DIR: logDir,
      },
    });
    base = platform.baseUrl;
    await waitForRoute(base, "GET", "/api/gpu/status");
    const registered = await http(base, "POST", "/api/auth/register", {
      body: { email: `started-${Date.now()}@example.com`, name: "started", password: "correct horse battery" },
    });
    token = registered.body.accessToken;
    await waitFor(async () => (await http(base, "GET", "/api/gpu/status", { token })).body?.cluster?.totalGpus === 1, { message: "the card announced" });
  });

  afterAll(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise((resolve) => stalling.close(resolve));
    await platform?.stop();
    rmSync(logDir, { recursive: true, force: true });
  });

  test("gpu started - an image that cannot be pulled: failed before starting, startedAt and result null, no GPU seconds", async () => {
    const image = `127.0.0.1:9/ci-platform/missing-${Date.now()}:1`;
    const created = await submit({ command: "echo never", containerImage: image });
    expect(created.status).toBe(201);
    const failed = await until(created.body.id, (j) => j.status === "failed", "the job failed");
    expect(failed).toMatchObject({
      status: "failed",
      startedAt: null,
      result: null,
      gpuSecondsUsed: 0,
      errorMessage: `Container image '${image}' could not be pulled: its registry could not be reached`,
    });
    expect(failed.completedAt).not.toBeNull();
  });

  test("gpu started - while its image is being pulled a job is not running: queued, startedAt null, 0 GPU seconds; a failed pull keeps it so", async () => {
    const image = `127.0.0.1:${stallingPort}/ci-platform/slow-${Date.now()}:1`;
    const before = stalls;
    const { body } = await submit({ command: "echo never", containerImage: image });
    await waitFor(() => stalls > before, { timeoutMs: 30_000, message: "the pull reaching the registry" });
    // The node has taken the job (its run answer is recorded) and holds the card, but nothing runs yet.
    const db = newPool({ connectionString: platform.databaseUrl, max: 1 });
    try {
      const stored = async () => (await db.query("SELECT status, started_at FROM gpu_scheduler.jobs WHERE id = $1", [body.id])).rows[0];
      expect(await waitFor(async () => ((row) => row.status === "running" && row)(await stored()), { message: "the node's answer recorded" })).toEqual({
        status: "running",
        started_at: null,
      });
    } finally {
      await db.end();
    }
    expect(await detail(body.id)).toMatchObject({ status: "queued", startedAt: null, gpuSecondsUsed: 0, result: null, completedAt: null });

    // The registry goes away: the pull fails, the job never started.
    stalling.close();
    for (const socket of sockets) socket.destroy();
    const failed = await until(body.id, (j) => j.status === "failed", "the job failed", 120_000);
    expect(failed).toMatchObject({ startedAt: null, result: null, gpuSecondsUsed: 0 });
    expect(failed.errorMessage).toMatch(new RegExp(`^Container image '${image.replace(/[.[\]]/g, "\\$&")}' could not be pulled: `));
  }, 150_000);

  test("gpu started - a running job's startedAt is no earlier than its container's start (Docker's State.StartedAt)", async () => {
    const { body } = await submit({ command: "echo up; exec sleep 30" });
    const running = await until(body.id, (j) => j.status === "running", "the job running");
    const [container] = await docker.listContainers({ filters: { label: [`${LABEL_JOB}=${body.id}`] } });
    const state = (await docker.getContainer(container.Id).inspect()).State;
    expect(state.Running).toBe(true);
    // Docker stamps nanoseconds; the node stamps once start() has returned, so never before it.
    expect(Date.parse(running.startedAt)).toBeGreaterThanOrEqual(Math.floor(Date.parse(state.StartedAt)));
    expect(Date.parse(running.startedAt)).toBeLessThanOrEqual(Date.now());
    const cancelled = await http(base, "POST", `/api/gpu/jobs/${body.id}/cancel`, { token });
    expect(cancelled.body).toMatchObject({ status: "cancelled", startedAt: running.startedAt });
    expect(cancelled.body.gpuSecondsUsed).toBeGreaterThanOrEqual(0);
    await waitFor(async () => (await http(base, "GET", "/api/gpu/status", { token })).body.cluster.busyGpus === 0, { message: "the card free again" });
  });
});
