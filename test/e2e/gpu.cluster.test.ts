/**
 * A GPU cluster over real NATS: the scheduler and three gpu-nodes (process executor, two
 * simulated cards each) in separate processes, the gateway and auth in this one. Node loss by
 * SIGKILL, a node frozen past the timeout that comes back, and a scheduler restart mid-burst.
 */
import { existsSync, mkdtempSync, readFileSync } from "fs";
import os from "os";
import path from "path";
import { Client } from "pg";
import { nodeLabel } from "../../services/gpu-scheduler/core/cluster-view";
import { ChildService, freePort, http, uniqueName, waitFor, processAlive } from "../support/platform";
import { NatsPlatform, startNatsPlatform } from "../support/nats-platform";

const NODE_TIMEOUT_S = 3;
const TERMINAL = ["completed", "failed", "cancelled"];

describe("gpu cluster - scheduler and three gpu-nodes over NATS", () => {
  const namespace = uniqueName("gpuc");
  const work = mkdtempSync(path.join(os.tmpdir(), "gpu-cluster-"));
  const env = {
    GPU_EXECUTOR: "process",
    // These jobs report to the test through host files, which a sandboxed job cannot reach
    // (the sandbox itself: test/security/sandbox.test.ts).
    GPU_UNSAFE_UNISOLATED_JOBS: "true",
    GPU_HEARTBEAT_S: "1",
    GPU_NODE_TIMEOUT_S: String(NODE_TIMEOUT_S),
    GPU_SCHEDULE_TICK_MS: "250",
    GPU_DISPATCH_TIMEOUT_S: "2",
    GPU_STOP_GRACE_S: "1",
    NODE_LABEL_SECRET: `labels-${namespace}`,
  };
  const nodeIds = [0, 1, 2].map((i) => `${namespace}-node-${i}`);
  // Clients see opaque node labels (job-view.ts), never node ids.
  const labelOf = (nodeId: string) => nodeLabel(nodeId, env.NODE_LABEL_SECRET);
  let nodes: ChildService[] = [];
  let scheduler: ChildService;
  let platform: NatsPlatform;
  let db: Client;
  let token: string;

  // A restarted scheduler keeps its node id, as a process restarted in place does.
  const schedulerId = `${namespace}-scheduler`;
  let schedulerHealth = "";
  const startScheduler = async () => {
    const port = await freePort();
    schedulerHealth = `http://127.0.0.1:${port}/ready`;
    return platform.spawn(["gpu-scheduler"], { NODE_ID: schedulerId, HEALTH_PORT: String(port) });
  };
  const startNode = (i: number) =>
    platform.spawn(["gpu-node"], {
      NODE_ID: nodeIds[i],
      GPU_SIMULATE: "NVIDIA GeForce RTX 3060:12288,NVIDIA GeForce RTX 3060:12288",
      GPU_JOB_LOG_DIR: path.join(work, `logs-${i}`),
    });
  const api = (method: string, url: string, body?: unknown) => http(platform.baseUrl, method, url, { token, body });
  const submit = async (command: string) => {
    const res = await api("POST", "/api/gpu/jobs", { command });
    expect(res.status).toBe(201);
    return res.body.id as string;
  };
  const jobsOf = async (ids: string[]) => Promise.all(ids.map(async (id) => (await api("GET", `/api/gpu/jobs/${id}`)).body));
  const clusterStatus = async () => (await api("GET", "/api/gpu/status")).body;
  const jobsOnNode = async (nodeId: string, ids: string[]) =>
    (await db.query<{ id: string }>("SELECT id FROM gpu_scheduler.jobs WHERE node_id = $1 AND id = ANY($2::uuid[])", [nodeId, ids])).rows.map((r) => r.id);

  beforeAll(async () => {
    platform = await startNatsPlatform({ namespace, env, work, local: ["api-gateway", "auth"] });
    scheduler = await startScheduler();
    nodes = [0, 1, 2].map(startNode);
    await platform.waitForRoute("GET", "/api/gpu/status", 60_000);
    const reg = await http(platform.baseUrl, "POST", "/api/auth/register", {
      body: { email: `${namespace}@example.com`, name: "Cluster", password: "password-123" },
    });
    token = reg.body.accessToken;
    await waitFor(async () => (await clusterStatus())?.cluster?.totalGpus === 6, { timeoutMs: 60_000, message: "six cards announced" });
    db = new Client({ connectionString: platform.databaseUrl });
    await db.connect();
  }, 90_000);

  afterAll(async () => {
    await db?.end();
    await platform?.stop();
  });

  test("gpu cluster - jobs spread over all cards; a node killed mid-job fails its jobs as lost while the others complete", async () => {
    const ids = await Promise.all(Array.from({ length: 6 }, () => submit("sleep 4; echo done")));
    await waitFor(async () => (await jobsOf(ids)).every((j) => j.status === "running"), { timeoutMs: 10_000, message: "six jobs running" });
    const status = await clusterStatus();
    expect(status.cluster).toMatchObject({ totalGpus: 6, busyGpus: 6, availableGpus: 0 });
    for (const nodeId of nodeIds) expect(status.cluster.gpus.filter((g: any) => g.nodeId === labelOf(nodeId) && !g.available)).toHaveLength(2);
    expect(JSON.stringify(status)).not.toContain(namespace);

    const doomed = await jobsOnNode(nodeIds[0], ids);
    expect(doomed).toHaveLength(2);
    const killedAt = Date.now();
    await nodes[0].stop("SIGKILL");
    await waitFor(async () => (await jobsOf(doomed)).every((j) => j.status === "failed"), {
      timeoutMs: NODE_TIMEOUT_S * 1000 + 3000,
      message: "the killed node's jobs failed",
    });
    expect(Date.now() - killedAt).toBeLessThan(NODE_TIMEOUT_S * 1000 + 3000);
    for (const job of await jobsOf(doomed)) expect(job.errorMessage).toMatch(new RegExp(`GPU node ${labelOf(nodeIds[0])} was lost`));

    const survivors = ids.filter((id) => !doomed.includes(id));
    await waitFor(async () => (await jobsOf(survivors)).every((j) => j.status === "completed"), { timeoutMs: 10_000, message: "the others completed" });
    for (const job of await jobsOf(survivors)) expect(job.result).toEqual({ exitCode: 0, output: "done\n" });
    const after = await clusterStatus();
    expect(after.cluster.totalGpus).toBe(4);
    expect(after.cluster.gpus.some((g: any) => g.nodeId === labelOf(nodeIds[0]))).toBe(false);
  });

  test("gpu cluster - scheduler killed mid-burst and restarted: every job ends, none lost, none run twice", async () => {
    const ran = path.join(work, "ran");
    const ids: string[] = [];
    // Each run leaves a line when it starts and one when it ends: a second run would show.
    for (let i = 0; i < 24; i++) ids.push(await submit(`echo start-${i} >> ${ran}; sleep 0.4; echo end-${i} >> ${ran}`));
    const lines = (kind: string) =>
      existsSync(ran)
        ? readFileSync(ran, "utf8")
            .split("\n")
            .filter((l) => l.startsWith(`${kind}-`))
        : [];
    // Killed while a job runs (started, not ended: it sleeps 0.4 s more), not in a gap between two
    // waves of jobs, when nothing handed to a node would be left to finish.
    await waitFor(() => lines("end").length >= 4 && lines("start").length > lines("end").length, {
      timeoutMs: 10_000,
      intervalMs: 5,
      message: "the burst under way, a job running",
    });

    await scheduler.stop("SIGKILL");
    const atKill = lines("end").length;
    // Jobs already handed to nodes keep running and report while no scheduler listens.
    await waitFor(() => lines("end").length > atKill, { timeoutMs: 5000, message: "jobs finishing while the scheduler is down" });
    // No API call while it is down: the gateway would wait for the dead process (no call timeout).
    scheduler = await startScheduler();
    await waitFor(async () => (await fetch(schedulerHealth).catch(() => undefined))?.status === 200, {
      timeoutMs: 30_000,
      message: "the restarted scheduler ready",
    });

    await waitFor(async () => (await jobsOf(ids)).every((j) => j && TERMINAL.includes(j.status)), {
      timeoutMs: 40_000,
      intervalMs: 200,
      message: "all 24 jobs terminal after the restart",
    });
    const final = await jobsOf(ids);
    expect(final.map((j) => j.status)).toEqual(ids.map(() => "completed"));
    const expected = ids.map((_, i) => i);
    const byNumber = (l: string) => Number(l.split("-")[1]);
    expect(
      lines("start")
        .map(byNumber)
        .sort((a, b) => a - b),
    ).toEqual(expected);
    expect(
      lines("end")
        .map(byNumber)
        .sort((a, b) => a - b),
    ).toEqual(expected);
  });

  test("gpu cluster - a node frozen past the timeout is lost; when it comes back it re-announces and stops the failed job", async () => {
    const pid = (i: number) => path.join(work, `frozen-${i}`);
    const ids = await Promise.all([0, 1, 2, 3].map((i) => submit(`echo $$ > ${pid(i)}; exec sleep 20`)));
    await waitFor(async () => (await jobsOf(ids)).every((j) => j.status === "running"), { timeoutMs: 10_000, message: "four jobs running" });
    const onFrozen = await jobsOnNode(nodeIds[1], ids);
    expect(onFrozen).toHaveLength(2);
    const pids = await Promise.all(
      onFrozen.map((id) =>
        waitFor(
          () => {
            const file = pid(ids.indexOf(id));
            return existsSync(file) && Number(readFileSync(file, "utf8").trim());
          },
          { message: "pid of a job on the frozen node" },
        ),
      ),
    );

    nodes[1].proc.kill("SIGSTOP");
    try {
      await waitFor(async () => (await jobsOf(onFrozen)).every((j) => j.status === "failed"), {
        timeoutMs: NODE_TIMEOUT_S * 1000 + 3000,
        message: "the frozen node's jobs failed",
      });
      expect((await clusterStatus()).cluster.totalGpus).toBe(2);
      for (const p of pids) expect(processAlive(p)).toBe(true);
    } finally {
      nodes[1].proc.kill("SIGCONT");
    }
    await waitFor(async () => (await clusterStatus()).cluster.totalGpus === 4, { message: "the node re-announced its cards" });
    await waitFor(() => pids.every((p) => !processAlive(p)), { timeoutMs: 8000, message: "the failed jobs stopped on the returning node" });
    for (const job of await jobsOf(onFrozen)) expect(job.status).toBe("failed");

    for (const id of ids.filter((id) => !onFrozen.includes(id))) expect((await api("POST", `/api/gpu/jobs/${id}/cancel`)).status).toBe(200);
  });
});
