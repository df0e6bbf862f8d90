/**
 * Draining a node over real NATS with two gpu-scheduler replicas (separate processes) and two
 * gpu-nodes of two simulated cards each; gateway, auth and admin in this process. The running job
 * on the drained node finishes, nothing new starts there (though it has a free card) while the
 * other node takes new jobs, a replica started after the drain keeps it drained, and resume
 * restores it.
 */
import { mkdtempSync, writeFileSync } from "fs";
import os from "os";
import path from "path";
import { ChildService, http, uniqueName, waitFor } from "../support/platform";
import { NatsPlatform, startNatsPlatform } from "../support/nats-platform";

describe("admin drain - two scheduler replicas, two gpu-nodes over NATS", () => {
  const namespace = uniqueName("drain");
  const work = mkdtempSync(path.join(os.tmpdir(), "admin-drain-"));
  const adminEmail = `${namespace}-ops@example.com`;
  const env = {
    GPU_EXECUTOR: "process",
    // The jobs wait for files the test writes, which a sandboxed job cannot see.
    GPU_UNSAFE_UNISOLATED_JOBS: "true",
    GPU_HEARTBEAT_S: "1",
    GPU_NODE_TIMEOUT_S: "5",
    GPU_SCHEDULE_TICK_MS: "200",
    GPU_DISPATCH_TIMEOUT_S: "2",
    GPU_STOP_GRACE_S: "1",
  };
  const nodeIds = [0, 1].map((i) => `${namespace}-node-${i}`);
  const schedulers: ChildService[] = [];
  let platform: NatsPlatform;
  let admin: string;
  let client: string;

  const startScheduler = (i: number) => platform.spawn(["gpu-scheduler"], { NODE_ID: `${namespace}-scheduler-${i}` });
  const startNode = (i: number) =>
    platform.spawn(["gpu-node"], {
      NODE_ID: nodeIds[i],
      GPU_SIMULATE: "Test GPU:1024,Test GPU:1024",
      GPU_JOB_LOG_DIR: path.join(work, `logs-${i}`),
    });
  const api = (token: string, method: string, url: string, body?: unknown) => http(platform.baseUrl, method, url, { token, body });
  /** A job that runs until the test writes its release file. */
  const held = async (name: string) => {
    const res = await api(client, "POST", "/api/gpu/jobs", { command: `while [ ! -f ${path.join(work, name)} ]; do sleep 0.05; done; echo ${name}` });
    expect(res.status).toBe(201);
    return res.body.id as string;
  };
  const release = (name: string) => writeFileSync(path.join(work, name), "");
  const adminJob = async (id: string) => (await api(admin, "GET", "/api/admin/jobs?limit=50")).body.jobs.find((j: any) => j.id === id);
  const onNode = (ids: string[], nodeId: string, status = "running") =>
    waitFor(async () => (await Promise.all(ids.map(adminJob))).every((j) => j?.status === status && j.nodeId === nodeId), {
      timeoutMs: 20_000,
      message: `${ids.length} job(s) ${status} on ${nodeId}`,
    });
  const nodeView = async (nodeId: string) => (await api(admin, "GET", "/api/admin/nodes")).body.nodes.find((n: any) => n.id === nodeId);

  beforeAll(async () => {
    platform = await startNatsPlatform({ namespace, env, work, local: ["api-gateway", "auth", "admin"], localEnv: { ADMIN_EMAILS: adminEmail } });
    schedulers.push(startScheduler(0), startScheduler(1));
    for (const i of [0, 1]) startNode(i);
    await platform.waitForRoute("GET", "/api/gpu/status", 60_000);
    const reg = (email: string) => http(platform.baseUrl, "POST", "/api/auth/register", { body: { email, name: "n", password: "password-123" } });
    admin = (await reg(adminEmail)).body.accessToken;
    client = (await reg(`${namespace}-client@example.com`)).body.accessToken;
    await waitFor(async () => (await api(client, "GET", "/api/gpu/status")).body?.cluster?.totalGpus === 4, { timeoutMs: 60_000, message: "four cards" });
  }, 90_000);

  afterAll(() => platform?.stop());

  test("admin drain - the running job finishes, nothing new starts on the drained node, a later replica keeps it drained, resume restores it", async () => {
    // A job on one node; that node drained while it runs (one card still free there).
    const first = await held("first");
    await waitFor(async () => (await adminJob(first))?.status === "running", { timeoutMs: 20_000, message: "the first job running" });
    const drained = (await adminJob(first)).nodeId as string;
    const other = nodeIds.find((id) => id !== drained)!;
    const drain = await api(admin, "POST", `/api/admin/nodes/${drained}/drain`);
    expect(drain.status).toBe(200);
    expect(drain.body).toMatchObject({ id: drained, state: "draining", runningJobs: [first] });
    expect(drain.body.cards.filter((c: any) => c.busy)).toHaveLength(1);

    // Four new jobs: two run on the other node, two wait, although the drained node has a free card.
    const next = [await held("a"), await held("a"), await held("b"), await held("b")];
    await waitFor(async () => (await Promise.all(next.map(adminJob))).filter((j) => j.status === "running").length === 2, {
      timeoutMs: 20_000,
      message: "two new jobs running",
    });
    const jobs = await Promise.all(next.map(adminJob));
    const started = jobs.filter((j) => j.status === "running");
    const waiting = jobs.filter((j) => j.status === "queued");
    expect(started.map((j) => j.nodeId)).toEqual([other, other]);
    expect(waiting).toHaveLength(2);
    for (const j of waiting) expect(j.statusReason).toMatch(/waiting for a free GPU/);
    // Clients: the drained node's free card is not available; every card still counted.
    const status = (await api(client, "GET", "/api/gpu/status")).body.cluster;
    expect(status).toMatchObject({ totalGpus: 4, availableGpus: 0, busyGpus: 4 });

    // Its running job finishes.
    release("first");
    await waitFor(async () => (await adminJob(first))?.status === "completed", { timeoutMs: 20_000, message: "the first job completed" });
    expect((await nodeView(drained)).runningJobs).toEqual([]);

    // Both replicas replaced by one started after the drain: once the other node frees up, the
    // waiting jobs go there, never to the drained node's two free cards.
    await Promise.all(schedulers.map((s) => s.stop()));
    schedulers.push(startScheduler(2));
    // Once the new replica hears both nodes it runs a pass at once: the drained node's free cards are left alone.
    await waitFor(async () => (await api(client, "GET", "/api/gpu/status")).body?.cluster?.totalGpus === 4, {
      timeoutMs: 30_000,
      message: "the new replica hears both nodes",
    });
    const pending = waiting.map((j) => j.id);
    expect((await Promise.all(pending.map(adminJob))).map((j) => j.status)).toEqual(["queued", "queued"]);
    release("a");
    release("b");
    await onNode(pending, other, "completed");
    expect((await nodeView(drained)).state).toBe("draining");

    // Resume: new jobs start on it again.
    const resumed = await api(admin, "POST", `/api/admin/nodes/${drained}/resume`);
    expect(resumed.body).toMatchObject({ id: drained, state: "ready", drainedAt: null, drainedBy: null });
    const after = [await held("c"), await held("c"), await held("c"), await held("c")];
    await waitFor(async () => (await Promise.all(after.map(adminJob))).every((j) => j.status === "running"), {
      timeoutMs: 20_000,
      message: "four jobs on four cards",
    });
    expect((await Promise.all(after.map(adminJob))).filter((j) => j.nodeId === drained)).toHaveLength(2);
    release("c");
  }, 120_000);
});
