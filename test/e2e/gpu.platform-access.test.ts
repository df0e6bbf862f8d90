/**
 * Jobs that use the platform (issue 28, API-DECISIONS "Jobs that use the platform") through the
 * gateway: gateway, auth, dbaas (on the tenant cluster), inference, gpu-scheduler and a real gpu-node
 * (process executor, one simulated card) in one process. The node's run call carries the grant;
 * the job's database role logs in with psql and works as the owner while the job runs, and is
 * gone with its sessions within 5 s of the job's end (completed, cancelled); bad input is 400 and
 * another account's database 404, creating nothing.
 * The job's `cit_` token is real (auth): listed with its jobId, accepted while the job runs, 401
 * once it ended. The node's relay (GPU_RELAY_*) points at this gateway and the tenant server: the
 * sandboxed job itself calls the platform through CI_PLATFORM_URL with its token (inside its scope:
 * 200; outside: 403 naming the scope) and writes through CI_DATABASE_URL_0 with psql.
 */
import { mkdtempSync, rmSync } from "fs";
import os from "os";
import path from "path";
import type { RunJobParams } from "../../lib/job-spec";
import { freePort, http, relayEnv, startTestPlatform, TestPlatform, waitFor, waitForRoute } from "../support/platform";
import { existing, psql, stopDbaasPlatform, tenantEnv, withClient } from "../integration/dbaas.helpers";

const CARD = "Test GPU";
const TOKEN = /^cit_[a-z0-9]{32}$/;

describe("gpu platform access - through the gateway", () => {
  let platform: TestPlatform;
  let base: string;
  let alice: string;
  let bob: string;
  const work = mkdtempSync(path.join(os.tmpdir(), "gpu-platform-"));
  const runs: RunJobParams[] = [];
  const tokenCalls: string[] = [];

  const submit = (body: unknown, token = alice) => http(base, "POST", "/api/gpu/jobs", { token, body });
  const detail = (id: string) => http(base, "GET", `/api/gpu/jobs/${id}`, { token: alice });
  const until = (id: string, accept: (job: any) => boolean, message: string) =>
    waitFor(async () => ((await detail(id)).body && accept((await detail(id)).body) ? (await detail(id)).body : false), {
      timeoutMs: 20_000,
      intervalMs: 50,
      message,
    });
  const register = async (name: string) =>
    (await http(base, "POST", "/api/auth/register", { body: { email: `${name}-${Date.now()}@example.com`, name, password: "correct horse battery" } })).body
      .accessToken as string;
  const createDatabase = async (token: string) => (await http(base, "POST", "/api/databases", { token, body: {} })).body;
  const runOf = (jobId: string) => waitFor(() => runs.find((r) => r.jobId === jobId) ?? false, { message: `the run call of ${jobId}` });
  /** The database's connection string with the job role's credentials. */
  const asJob = (db: any, grant: { user: string; password: string }) =>
    db.connectionString.replace(`${db.username}:${db.password}`, `${grant.user}:${grant.password}`);

  beforeAll(async () => {
    const port = await freePort();
    platform = await startTestPlatform({
      services: ["api-gateway", "auth", "dbaas", "gpu-scheduler", "gpu-node", "inference"],
      env: tenantEnv({
        PORT: String(port),
        OLLAMA_URL: "off", // no model provider: the job's in-scope call is the model list
        // The node's relay: this gateway and the tenant server, the only places a job may reach.
        ...relayEnv(`http://127.0.0.1:${port}`),
        GPU_EXECUTOR: "process",
        GPU_SIMULATE: `${CARD}:1024`,
        GPU_HEARTBEAT_S: "1",
        GPU_SCHEDULE_TICK_MS: "100",
        GPU_STOP_GRACE_S: "1",
        GPU_JOB_LOG_DIR: path.join(work, "logs"),
      }),
    });
    // The scheduler's calls to the node and to auth's job-token actions, recorded as they pass (all real).
    const call = platform.broker.call.bind(platform.broker);
    jest.spyOn(platform.broker, "call").mockImplementation(((action: string, params: any, opts: any) => {
      if (action === "gpu-node.run") runs.push(params);
      if (action === "auth.issueJobToken" || action === "auth.revokeJobTokens") tokenCalls.push(`${action} ${params.jobId}`);
      return call(action, params, opts);
    }) as typeof platform.broker.call);
    base = platform.baseUrl;
    await waitForRoute(base, "GET", "/api/gpu/status");
    [alice, bob] = [await register("alice"), await register("bob")];
    await waitFor(async () => (await http(base, "GET", "/api/gpu/status", { token: alice })).body?.cluster?.totalGpus === 1, { message: "the card announced" });
  });

  afterAll(async () => {
    await stopDbaasPlatform(platform);
    rmSync(work, { recursive: true, force: true });
  });

  /** Runs a job with a role on `db` and checks, while it runs, that the role logs in and works as the owner; returns its grant. */
  async function runningWithRole(db: any, command: string) {
    const res = await submit({ command, platformAccess: { scopes: ["inference"], databases: [db.id] } });
    expect(res.status).toBe(201);
    const run = await runOf(res.body.id);
    expect(run.platform!.token).toMatch(TOKEN);
    expect(run.platform!.databases).toEqual([{ database: db.databaseName, user: expect.stringMatching(/^job_/), password: expect.any(String) }]);
    expect(JSON.stringify(run.env ?? {})).not.toContain(run.platform!.databases[0].password); // never in the stored env
    const grant = run.platform!.databases[0];
    await until(res.body.id, (j) => j.status === "running", "the job to run");
    const made = psql(asJob(db, grant), `CREATE TABLE t_${res.body.id.slice(0, 8)} (n int)`, "SELECT current_user");
    expect([made.status, made.stderr, made.stdout.trim().split("\n").pop()]).toEqual([0, "", db.username]);
    const me = await http(base, "GET", "/api/auth/me", { token: run.platform!.token });
    expect(me.status).toBe(200); // the job's token works while it runs
    const listed = (await http(base, "GET", "/api/auth/tokens", { token: alice })).body.tokens;
    expect(listed).toContainEqual(expect.objectContaining({ jobId: res.body.id, scopes: ["inference"], databases: [db.id] }));
    const shown = (await detail(res.body.id)).body;
    expect(shown.platformAccess).toEqual({ scopes: ["inference"], databases: [db.id] });
    expect(JSON.stringify(shown)).not.toContain(grant.password);
    expect(JSON.stringify(shown)).not.toContain(run.platform!.token);
    return { id: res.body.id as string, grant, token: run.platform!.token };
  }

  /** Within 5 s of the job's end: its role is gone, a session it held was ended, its token revoked. */
  async function revokedWithin5s(id: string, grant: { user: string }, token: string, sessionEnded: Promise<void>) {
    const endedAt = Date.now();
    await sessionEnded;
    await waitFor(async () => (await existing({ roles: [grant.user] })).length === 0, { timeoutMs: 5000, message: "the job role dropped" });
    await waitFor(async () => (await http(base, "GET", "/api/auth/me", { token })).status === 401, { timeoutMs: 5000, message: "the job's token refused" });
    expect(Date.now() - endedAt).toBeLessThan(5000);
    expect(tokenCalls).toContain(`auth.revokeJobTokens ${id}`);
    const listed = (await http(base, "GET", "/api/auth/tokens", { token: alice })).body.tokens;
    expect(listed.filter((t: { jobId: string | null }) => t.jobId === id)).toEqual([]);
  }

  /** A session of the role held open until the server ends it. */
  async function heldSession(db: any, grant: { user: string; password: string }): Promise<{ ended: Promise<void> }> {
    let open = false;
    const ended = withClient(asJob(db, grant), async (client) => {
      const gone = new Promise<void>((resolve) => client.once("end", () => resolve()));
      await client.query("SELECT 1");
      open = true;
      await gone;
    });
    await waitFor(() => open, { message: "the role's session" });
    return { ended };
  }

  test("gpu platform access - a job that completes: its role works while it runs, then it and its token are revoked within 5 s", async () => {
    const db = await createDatabase(alice);
    // The job itself, in its sandbox: the platform through CI_PLATFORM_URL (in scope, then out of scope), its database with psql.
    const inJob = [
      'echo "me $(curl -s -o /dev/null -w "%{http_code}" -H "Authorization: Bearer $CI_PLATFORM_TOKEN" "$CI_PLATFORM_URL/api/auth/me")"',
      'echo "models $(curl -s -o /dev/null -w "%{http_code}" -H "Authorization: Bearer $CI_PLATFORM_TOKEN" "$CI_PLATFORM_URL/v1/models")"',
      'echo "jobs $(curl -s -H "Authorization: Bearer $CI_PLATFORM_TOKEN" "$CI_PLATFORM_URL/api/gpu/jobs")"',
      'psql "$CI_DATABASE_URL_0" -qAt -c "CREATE TABLE from_job (n int)" -c "INSERT INTO from_job VALUES (7)" -c "SELECT current_user"',
      "sleep 8", // long enough for the checks while it runs, even on a loaded machine
    ].join("; ");
    const { id, grant, token } = await runningWithRole(db, inJob);
    const session = await heldSession(db, grant);
    await until(id, (j) => j.status === "completed", "the job to complete");
    const lines = (await http(base, "GET", `/api/gpu/jobs/${id}/logs`, { token: alice })).text.trim().split("\n");
    expect(lines.slice(0, 2)).toEqual(["me 200", "models 200"]);
    expect(JSON.parse(lines[2].slice("jobs ".length))).toMatchObject({ error: { code: "FORBIDDEN", details: { missingScope: "jobs:read" } } });
    expect(lines[3]).toBe(db.username); // the job's role works as the database's owner
    await revokedWithin5s(id, grant, token, session.ended);
    // The owner keeps what the job made.
    expect(psql(db.connectionString, `SELECT count(*) FROM t_${id.slice(0, 8)}`).stdout.trim()).toBe("0");
    expect(psql(db.connectionString, "SELECT n FROM from_job").stdout.trim()).toBe("7");
  });

  test("gpu platform access - a cancelled job: its role and token end within 5 s", async () => {
    const db = await createDatabase(alice);
    const { id, grant, token } = await runningWithRole(db, "sleep 600");
    const session = await heldSession(db, grant);
    expect((await http(base, "POST", `/api/gpu/jobs/${id}/cancel`, { token: alice })).status).toBe(200);
    await revokedWithin5s(id, grant, token, session.ended);
  });

  test("gpu platform access - a job without platformAccess gets no grant and no token", async () => {
    const res = await submit({ command: "true" });
    const run = await runOf(res.body.id);
    expect(run.platform).toBeUndefined();
    expect(tokenCalls.some((c) => c.includes(res.body.id))).toBe(false);
  });

  test("gpu platform access - another account's database, an unknown one: 404 and no job", async () => {
    const bobs = await createDatabase(bob);
    for (const id of [bobs.id, "00000000-0000-4000-8000-000000000000", "not-a-uuid"]) {
      const before = (await http(base, "GET", "/api/gpu/jobs", { token: alice })).body.jobs.length;
      const res = await submit({ command: "true", platformAccess: { scopes: ["inference"], databases: [id] } });
      expect([res.status, res.body.error?.code]).toEqual([404, "NOT_FOUND"]);
      expect((await http(base, "GET", "/api/gpu/jobs", { token: alice })).body.jobs.length).toBe(before);
    }
  });

  test("gpu platform access - a caller with a restricted token cannot give its job more than the token", async () => {
    const db = await createDatabase(alice);
    const other = await createDatabase(alice);
    const made = await http(base, "POST", "/api/auth/tokens", {
      token: alice,
      body: { name: "ci", scopes: ["jobs:write", "inference", "databases:write"], databases: [db.id] },
    });
    expect(made.status).toBe(201);
    const cit = made.body.token as string;
    const tries: Array<[unknown, number]> = [
      [{ scopes: ["usage:read"] }, 400], // a scope it lacks
      [{ scopes: ["inference"], databases: [other.id] }, 404], // a database outside its list
      [{ scopes: ["inference"], databases: [db.id] }, 201],
    ];
    for (const [platformAccess, status] of tries) {
      const res = await submit({ command: "true", platformAccess }, cit);
      expect([JSON.stringify(platformAccess), res.status]).toEqual([JSON.stringify(platformAccess), status]);
      if (status === 400) expect(res.body.error.details).toEqual([{ field: "platformAccess.scopes", message: expect.stringContaining("usage:read") }]);
    }
  });

  test.each([
    ["an unknown scope", { scopes: ["admin"] }],
    ["scopes missing", { databases: [] }],
    ["scopes empty", { scopes: [] }],
    ["a field it does not know", { scopes: ["inference"], secrets: true }],
    ["databases not an array", { scopes: ["inference"], databases: "x" }],
    ["a repeated scope", { scopes: ["inference", "inference"] }],
    ["not an object", "inference"],
  ])("gpu platform access - %s is 400 naming platformAccess", async (_name, platformAccess) => {
    const res = await submit({ command: "true", platformAccess });
    expect([res.status, res.body.error?.code]).toEqual([400, "VALIDATION_FAILED"]);
    expect(JSON.stringify(res.body.error.details)).toContain("platformAccess");
  });
});
