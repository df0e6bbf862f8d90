/**
 * The operators' API (/api/admin, API-DECISIONS Part 2 "Usage, quotas and operators") through the
 * HTTP gateway: gateway, auth, admin, gpu-scheduler and a gpu-node (process executor, one
 * simulated card) in one process. Who may call it, the job list and its filters, cancel of another
 * account's jobs, archived jobs in the list and refused by cancel, and the audit trail naming the
 * administrator.
 */
import { mkdtempSync, rmSync } from "fs";
import os from "os";
import path from "path";
import { Client } from "pg";
import { newPool } from "../../lib/db";
import { HistoryRepository } from "../../services/gpu-scheduler/store/history.repository";
import { http, startTestPlatform, TestPlatform, waitFor, waitForRoute } from "../support/platform";

const ADMIN_EMAIL = `ops-${Math.random().toString(36).slice(2, 10)}@example.com`;
const MISSING_JOB = "00000000-0000-4000-8000-000000000000";

describe("admin - the operators' API through the gateway", () => {
  let platform: TestPlatform;
  let base: string;
  let db: Client;
  let admin: { token: string; id: string };
  let bob: { token: string; id: string; apiKey: string };
  let carol: { token: string; id: string };
  let nodeId: string;
  const work = mkdtempSync(path.join(os.tmpdir(), "admin-api-"));
  const logLines: string[] = [];

  const register = async (name: string, email = `${name}-${Date.now()}-${Math.random().toString(36).slice(2, 6)}@example.com`) => {
    const res = await http(base, "POST", "/api/auth/register", { body: { email, name, password: "correct horse battery" } });
    expect(res.status).toBe(201);
    return { token: res.body.accessToken as string, id: res.body.client.id as string, role: res.body.client.role as string };
  };
  const as = (token: string | undefined, method: string, url: string, body?: unknown) => http(base, method, url, { token, body });
  const submit = async (token: string, command: string) => {
    const res = await as(token, "POST", "/api/gpu/jobs", { command });
    expect(res.status).toBe(201);
    return res.body.id as string;
  };
  const jobOf = async (token: string, id: string) => (await as(token, "GET", `/api/gpu/jobs/${id}`)).body;
  const auditRows = async () =>
    (
      await db.query<{ admin_id: string; action: string; target: any; outcome: string }>(
        "SELECT admin_id, action, target, outcome FROM admin.audit_log ORDER BY id",
      )
    ).rows;

  // Every admin route, with a well-formed target (the refusal must come before any lookup).
  const routes = (): Array<[string, string]> => [
    ["GET", "/api/admin/nodes"],
    ["POST", `/api/admin/nodes/${nodeId}/drain`],
    ["POST", `/api/admin/nodes/${nodeId}/resume`],
    ["POST", `/api/admin/nodes/${nodeId}/cards/accept`],
    ["GET", "/api/admin/jobs"],
    ["POST", `/api/admin/jobs/${MISSING_JOB}/cancel`],
  ];

  beforeAll(async () => {
    for (const method of ["log", "warn", "error", "info"] as const)
      jest.spyOn(console, method).mockImplementation((...args: unknown[]) => void logLines.push(args.map(String).join(" ")));
    platform = await startTestPlatform({
      services: ["api-gateway", "auth", "admin", "gpu-scheduler", "gpu-node"],
      env: {
        LOG_LEVEL: "info",
        ADMIN_EMAILS: ADMIN_EMAIL,
        AUTH_RATE_LIMIT_PER_IP: "10000",
        GPU_EXECUTOR: "process",
        GPU_SIMULATE: "Test GPU:1024",
        GPU_HEARTBEAT_S: "1",
        GPU_SCHEDULE_TICK_MS: "100",
        GPU_STOP_GRACE_S: "1",
        GPU_JOB_LOG_DIR: path.join(work, "logs"),
      },
    });
    base = platform.baseUrl;
    await waitForRoute(base, "GET", "/api/gpu/status");
    await waitForRoute(base, "GET", "/api/admin/nodes");
    admin = await register("ops", ADMIN_EMAIL);
    const b = await register("bob");
    const key = await as(b.token, "POST", "/api/auth/api-keys");
    bob = { ...b, apiKey: key.body.apiKey };
    carol = await register("carol");
    await waitFor(async () => (await as(bob.token, "GET", "/api/gpu/status")).body?.cluster?.totalGpus === 1, { message: "the card announced" });
    nodeId = (await as(admin.token, "GET", "/api/admin/nodes")).body.nodes[0].id;
    db = new Client({ connectionString: platform.databaseUrl });
    await db.connect();
  }, 60_000);

  afterAll(async () => {
    await db?.end();
    await platform?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  it("admin - every admin route is 401 without credentials and 403 FORBIDDEN to a client (JWT or API key), and changes nothing", async () => {
    const before = await auditRows();
    for (const [method, url] of routes()) {
      const anonymous = await as(undefined, method, url);
      expect([url, anonymous.status, anonymous.body?.error?.code]).toEqual([url, 401, "UNAUTHORIZED"]);
      const client = await as(bob.token, method, url);
      expect([url, client.status, client.body?.error?.code]).toEqual([url, 403, "FORBIDDEN"]);
      const viaKey = await http(base, method, url, { headers: { "x-api-key": bob.apiKey } });
      expect([url, viaKey.status]).toEqual([url, 403]);
    }
    // The client's drain did nothing: the node is still ready; refusals leave no audit row (nobody can fill the table).
    const nodes = await as(admin.token, "GET", "/api/admin/nodes");
    expect(nodes.body.nodes[0].state).toBe("ready");
    expect((await auditRows()).length).toBe(before.length + 1); // the admin's own GET just now
  });

  it("admin - a role in the register body or in any admin request body makes no one an admin", async () => {
    // A field the platform does not know is 400 naming it (API-DECISIONS Part 3): no account is made.
    const body = { email: `sneaky-${Date.now()}@example.com`, name: "sneaky", password: "correct horse battery", role: "admin" };
    const refused = await http(base, "POST", "/api/auth/register", { body });
    expect([refused.status, refused.body.error.details]).toEqual([400, [expect.objectContaining({ field: "role" })]]);
    const sneaky = await register("sneaky", body.email);
    expect(sneaky.role).toBe("client");
    expect((await as(sneaky.token, "GET", "/api/admin/nodes")).status).toBe(403);
    const withRole = await as(sneaky.token, "POST", `/api/admin/nodes/${nodeId}/drain`, { role: "admin", caller: { role: "admin" } });
    expect(withRole.status).toBe(403);
    const put = await as(sneaky.token, "PUT", `/api/admin/nodes/${nodeId}/drain`, { role: "admin" });
    expect([403, 404]).toContain(put.status);
    const login = await http(base, "POST", "/api/auth/login", { body: { email: "nobody@example.com", password: "x", role: "admin" } });
    expect([login.status, login.body.error.details]).toEqual([400, [expect.objectContaining({ field: "role" })]]);
  });

  it("admin - GET /api/admin/nodes names the node by its real id, with its card and state", async () => {
    const res = await as(admin.token, "GET", "/api/admin/nodes");
    expect(res.status).toBe(200);
    expect(res.body.nodes).toHaveLength(1);
    const [node] = res.body.nodes;
    expect(node).toMatchObject({ id: nodeId, state: "ready", runningJobs: [], drainedAt: null, lostAt: null });
    expect(node.label).toMatch(/^node-[0-9a-f]{8}$/);
    expect(node.cards).toEqual([expect.objectContaining({ name: "Test GPU", memoryTotal: 1024, busy: false })]);
    // Clients see only the label.
    const status = await as(bob.token, "GET", "/api/gpu/status");
    expect(status.body.cluster.gpus[0].nodeId).toBe(node.label);
    expect(JSON.stringify(status.body)).not.toContain(nodeId);
  });

  it("admin - bad input is 400 VALIDATION_FAILED and changes nothing", async () => {
    const cases: Array<[string, string]> = [
      ["GET", "/api/admin/jobs?status=done"],
      ["GET", "/api/admin/jobs?status=assigned"], // a stored state, not a public one
      ["GET", "/api/admin/jobs?clientId=not-a-uuid"],
      ["GET", "/api/admin/jobs?limit=0"],
      ["GET", "/api/admin/jobs?limit=51"],
      ["GET", "/api/admin/jobs?before=-1"],
      ["GET", "/api/admin/jobs?before=1%20OR%201=1"],
      ["POST", "/api/admin/jobs/not-a-uuid/cancel"],
      ["POST", `/api/admin/jobs/${MISSING_JOB}'/cancel`],
      ["POST", "/api/admin/nodes/bad%20id/drain"],
      ["POST", `/api/admin/nodes/${"x".repeat(201)}/drain`],
    ];
    for (const [method, url] of cases) {
      const res = await as(admin.token, method, url);
      expect([url, res.status, res.body?.error?.code]).toEqual([url, 400, "VALIDATION_FAILED"]);
    }
    expect((await as(admin.token, "GET", "/api/admin/nodes")).body.nodes[0].state).toBe("ready");
    // Unknown targets: 404, nothing created.
    expect((await as(admin.token, "POST", `/api/admin/jobs/${MISSING_JOB}/cancel`)).status).toBe(404);
    const unknown = await as(admin.token, "POST", "/api/admin/nodes/gpu-node.nowhere/drain");
    expect([unknown.status, unknown.body.error.code]).toEqual([404, "NOT_FOUND"]);
    expect((await as(admin.token, "GET", "/api/admin/nodes")).body.nodes.map((n: any) => n.id)).toEqual([nodeId]);
  });

  it("admin - the job list spans accounts, filters by status and account, and pages newest first", async () => {
    const running = await submit(bob.token, "sleep 60");
    await waitFor(async () => (await jobOf(bob.token, running)).status === "running", { timeoutMs: 15_000, message: "bob's job running" });
    const bobQueued = [await submit(bob.token, "echo b1"), await submit(bob.token, "echo b2")];
    const carolQueued = await submit(carol.token, "echo c1");

    const all = await as(admin.token, "GET", "/api/admin/jobs");
    expect(all.status).toBe(200);
    expect(all.body.jobs.slice(0, 4).map((j: any) => j.id)).toEqual([carolQueued, ...[...bobQueued].reverse(), running]);
    expect(all.body.jobs[0]).toMatchObject({ clientId: carol.id, status: "queued", nodeId: null });

    const bobs = await as(admin.token, "GET", `/api/admin/jobs?clientId=${bob.id}`);
    expect(bobs.body.jobs.every((j: any) => j.clientId === bob.id)).toBe(true);
    expect(bobs.body.jobs.map((j: any) => j.id)).toEqual([...[...bobQueued].reverse(), running]);

    const runningNow = await as(admin.token, "GET", "/api/admin/jobs?status=running");
    expect(runningNow.body.jobs.map((j: any) => j.id)).toEqual([running]);
    expect(runningNow.body.jobs[0]).toMatchObject({ clientId: bob.id, nodeId });

    const queuedBob = await as(admin.token, "GET", `/api/admin/jobs?status=queued&clientId=${bob.id}`);
    expect(queuedBob.body.jobs.map((j: any) => j.id)).toEqual([...bobQueued].reverse());
    expect(queuedBob.body.jobs.every((j: any) => j.queuePosition >= 1)).toBe(true);
    expect((await as(admin.token, "GET", `/api/admin/jobs?status=completed&clientId=${carol.id}`)).body).toEqual({ jobs: [], nextCursor: null });

    // Pages of one: each page's cursor leads to the next older job, and the last page says so.
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page: any = await as(admin.token, "GET", `/api/admin/jobs?clientId=${bob.id}&limit=1${cursor ? `&before=${cursor}` : ""}`);
      expect(page.body.jobs.length).toBeLessThanOrEqual(1);
      seen.push(...page.body.jobs.map((j: any) => j.id));
      cursor = page.body.nextCursor;
    } while (cursor);
    expect(seen).toEqual(bobs.body.jobs.map((j: any) => j.id));

    // The admin's cancel of another account's queued and running jobs; the owner sees them cancelled.
    const cancelQueued = await as(admin.token, "POST", `/api/admin/jobs/${bobQueued[0]}/cancel`);
    expect(cancelQueued.status).toBe(200);
    expect(cancelQueued.body).toMatchObject({ id: bobQueued[0], status: "cancelled", clientId: bob.id, statusReason: "cancelled by an administrator" });
    const cancelRunning = await as(admin.token, "POST", `/api/admin/jobs/${running}/cancel`);
    expect(cancelRunning.body).toMatchObject({ id: running, status: "cancelled", clientId: bob.id });
    expect(await jobOf(bob.token, running)).toMatchObject({ status: "cancelled", statusReason: "cancelled by an administrator" });
    expect((await jobOf(bob.token, bobQueued[0])).status).toBe("cancelled");
    const again = await as(admin.token, "POST", `/api/admin/jobs/${running}/cancel`);
    expect([again.status, again.body.error.code]).toEqual([409, "INVALID_STATE"]);
    // The card is free again: the queued jobs run and complete.
    await waitFor(async () => (await jobOf(bob.token, bobQueued[1])).status === "completed" && (await jobOf(carol.token, carolQueued)).status === "completed", {
      timeoutMs: 20_000,
      message: "the other queued jobs complete",
    });
    // A client still cannot reach another account's job through its own routes.
    expect((await as(carol.token, "POST", `/api/gpu/jobs/${bobQueued[1]}/cancel`)).status).toBe(404);
  }, 60_000);

  it("admin - every admin action leaves an audit row and a log line naming the administrator, the action and the target", async () => {
    await as(admin.token, "POST", `/api/admin/jobs/${MISSING_JOB}/cancel`);
    const rows = await auditRows();
    expect(rows.every((r) => r.admin_id === admin.id)).toBe(true);
    expect(rows.at(-1)).toEqual({ admin_id: admin.id, action: "admin.cancelJob", target: { id: MISSING_JOB }, outcome: "NOT_FOUND" });
    expect(rows.some((r) => r.action === "admin.cancelJob" && r.outcome === "ok")).toBe(true);
    await waitFor(() => logLines.some((l) => l.includes("admin audit:") && l.includes(admin.id) && l.includes("admin.cancelJob") && l.includes(MISSING_JOB)), {
      message: "the audit log line",
    });
  });

  it("admin - an archived job is listed with the same filters and paging, and its cancel is 409 INVALID_STATE", async () => {
    const done = await submit(carol.token, "echo archived");
    await waitFor(async () => (await jobOf(carol.token, done)).status === "completed", { timeoutMs: 20_000, message: "carol's job completed" });
    const newer = await submit(carol.token, "sleep 30"); // stays in the queue table: the list merges both
    // Archive now what job-history.ts would after GPU_JOB_ARCHIVE_AFTER_S (its own statement).
    const pool = newPool({ connectionString: platform.databaseUrl, max: 1 });
    try {
      while ((await new HistoryRepository(pool).archive(new Date(Date.now() + 60_000), 1000)) > 0);
    } finally {
      await pool.end();
    }
    expect((await db.query("SELECT 1 FROM gpu_scheduler.jobs_history WHERE id = $1", [done])).rowCount).toBe(1);

    const completed = await as(admin.token, "GET", `/api/admin/jobs?status=completed&clientId=${carol.id}`);
    expect(completed.body.jobs.map((j: any) => j.id)).toContain(done);
    expect(completed.body.jobs.find((j: any) => j.id === done)).toMatchObject({ clientId: carol.id, status: "completed" });
    const page1 = await as(admin.token, "GET", `/api/admin/jobs?clientId=${carol.id}&limit=1`);
    expect(page1.body.jobs.map((j: any) => j.id)).toEqual([newer]);
    const page2 = await as(admin.token, "GET", `/api/admin/jobs?clientId=${carol.id}&limit=1&before=${page1.body.nextCursor}`);
    expect(page2.body.jobs.map((j: any) => j.id)).toEqual([done]);
    expect((await as(admin.token, "GET", `/api/admin/jobs?status=queued&clientId=${carol.id}`)).body.jobs.map((j: any) => j.id)).not.toContain(done);

    const cancel = await as(admin.token, "POST", `/api/admin/jobs/${done}/cancel`);
    expect([cancel.status, cancel.body.error?.code]).toEqual([409, "INVALID_STATE"]);
    expect(await jobOf(carol.token, done)).toMatchObject({ status: "completed" });
    expect((await as(admin.token, "POST", `/api/admin/jobs/${newer}/cancel`)).status).toBe(200);
  }, 60_000);
});
