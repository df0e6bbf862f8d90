/**
 * Live output and events across processes over real NATS: the gateway (with auth) and the
 * scheduler each in its own Node process, and a gpu-node on the Docker executor in this one (so
 * the test sees its followers). A real container prints a line a second; its lines reach the
 * client while it runs; a client that leaves mid-follow stops the node's work for it.
 */
import Docker from "dockerode";
import { mkdtempSync } from "fs";
import os from "os";
import path from "path";
import { removeContainersOf } from "../support/docker";
import { followLog } from "../support/follow";
import { http, uniqueName, waitFor } from "../support/platform";
import { NatsPlatform, startNatsPlatform } from "../support/nats-platform";
import { openEventStream, statusEvents } from "../support/sse";

const TEST_JOB_IMAGE = process.env.TEST_JOB_IMAGE || "ci-platform/test-busybox:latest";
const docker = new Docker();

describe("gpu live - follow and events with gateway, scheduler and node in separate processes", () => {
  const namespace = uniqueName("live");
  const work = mkdtempSync(path.join(os.tmpdir(), "gpu-live-"));
  let platform: NatsPlatform;
  let base: string;
  let token: string;

  const submit = async (command: string) => {
    const res = await http(base, "POST", "/api/gpu/jobs", { token, body: { command } });
    expect(res.status).toBe(201);
    return res.body.id as string;
  };
  const detail = async (id: string) => (await http(base, "GET", `/api/gpu/jobs/${id}`, { token })).body;
  const followers = () => (platform.local!.broker.getLocalService("gpu-node") as any).node.logs.followers;

  beforeAll(async () => {
    for (const method of ["log", "warn", "error"] as const) jest.spyOn(console, method).mockImplementation(() => undefined);
    await docker.getImage(TEST_JOB_IMAGE).inspect(); // never skipped: without the image this fails
    platform = await startNatsPlatform({
      namespace,
      work,
      env: { JWT_SECRET: `jwt-${namespace}`, GPU_FOLLOW_WAIT_MS: "20000" },
      processes: [
        { services: ["api-gateway", "auth"], env: { NODE_ID: `${namespace}-gw` } },
        { services: ["gpu-scheduler"], env: { NODE_ID: `${namespace}-sched`, GPU_SCHEDULE_TICK_MS: "200" } },
      ],
      local: ["gpu-node"],
      localEnv: {
        GPU_EXECUTOR: "docker",
        GPU_DEFAULT_IMAGE: TEST_JOB_IMAGE,
        GPU_ALLOWED_REGISTRIES: "docker.io",
        GPU_SIMULATE: "Live Test GPU:1024",
        GPU_JOB_MEMORY_MB: "256",
        GPU_HEARTBEAT_S: "0.5",
        GPU_STOP_GRACE_S: "1",
        GPU_JOB_LOG_DIR: path.join(work, "logs"),
      },
      ready: (p) =>
        p.waitFor(
          async () => {
            const res = await http(p.baseUrl, "POST", "/api/auth/register", {
              body: { email: `${uniqueName("u")}@example.com`, name: "Live", password: "password-123" },
            }).catch(() => undefined);
            if (res?.status !== 201) return false;
            token = res.body.accessToken;
            return (await http(p.baseUrl, "GET", "/api/gpu/status", { token })).body?.cluster?.totalGpus === 1;
          },
          { timeoutMs: 60_000, intervalMs: 250, message: "gateway, scheduler and node to see each other" },
        ),
    });
    base = platform.baseUrl;
  }, 90_000);

  afterAll(async () => {
    await platform?.stop();
    await removeContainersOf(docker, namespace);
  });

  test("gpu live - a Docker job printing a line a second: each line reaches the follower while the job runs; SSE shows its statuses", async () => {
    const id = await submit("for i in 1 2 3 4; do echo tick $i; sleep 1; done");
    const events = await openEventStream(`${base}/api/gpu/jobs/${id}/events`, token);
    const log = await followLog(`${base}/api/gpu/jobs/${id}/logs?follow=true`, token);
    expect(log.response.status).toBe(200);
    // Each line arrives while the job still runs: the following ones are yet to be printed.
    for (const i of [1, 2, 3]) {
      const text = await log.until((t) => t.includes(`tick ${i}\n`));
      expect(text).not.toContain(`tick ${i + 1}`);
      // Nor has the job ended. (Its node's "running" report travels over JetStream on its own: the
      // first line can overtake it, and the job still reads as queued for that moment.)
      expect(["queued", "running"]).toContain((await detail(id)).status);
    }
    expect(await log.rest()).toBe("tick 1\ntick 2\ntick 3\ntick 4\n");
    const { statuses } = await statusEvents(events);
    expect(statuses).toEqual(["queued", "running", "completed"]);
  }, 60_000);

  test("gpu live - a follower that leaves mid-follow: the node stops waiting and sends nothing more for it", async () => {
    const id = await submit("echo begin; sleep 60");
    const log = await followLog(`${base}/api/gpu/jobs/${id}/logs?follow=true`, token);
    await log.until((t) => t.includes("begin\n"));
    await waitFor(() => followers().waiting === 1, { message: "the node waiting for new output" });
    log.close();
    // The page wait is 20 s: ending within a few seconds means the stop crossed gateway → scheduler → node.
    await waitFor(() => followers().waiting === 0, { timeoutMs: 5_000, message: "the node's wait ended" });
    const served = followers().served;
    await http(base, "POST", `/api/gpu/jobs/${id}/cancel`, { token });
    await waitFor(async () => (await detail(id)).status === "cancelled", { timeoutMs: 20_000, message: "cancelled" });
    expect(followers().served).toBe(served);
  }, 60_000);
});
