/**
 * Jobs with platformAccess (issue 28) on fakes: the submission rules against a caller's token
 * (table), the grant made per attempt and swept once the attempt ends, and the placement loop
 * handing the grant to the node only for jobs that asked (the others make no call).
 */
import { randomUUID } from "crypto";
import type { PlatformAccessParams } from "../../lib/job-spec";
import type { Caller, TokenLimits } from "../../lib/identity";
import { accessProblem } from "../../services/gpu-scheduler/api/platform-access";
import { PlacementLoop } from "../../services/gpu-scheduler/loop/placement-loop";
import { GrantFailed, PlatformCalls, PlatformGrants } from "../../services/gpu-scheduler/loop/platform-grants";
import type { GrantRow } from "../../services/gpu-scheduler/store/grants.repository";
import { fakeCluster, heartbeat, quiet, until } from "./gpu-scheduler.fakes";

describe("gpu-scheduler platform access - within the caller's token", () => {
  const token: TokenLimits = { id: "t", scopes: ["jobs:write", "inference", "databases:read"], models: ["m1"], databases: ["db-1"], jobId: null };
  const caller = (limits?: TokenLimits): Caller => ({ clientId: "c", role: "client", via: limits ? "token" : "jwt", ...(limits && { token: limits }) });
  const withWrite: TokenLimits = { ...token, scopes: ["databases:write"], models: null };
  // lib/token-grants.ts has its own table (auth.token-grants.test.ts); here what the scheduler adds and how it answers.
  test.each<[string, PlatformAccessParams, TokenLimits | undefined, "notFound" | string | null]>([
    ["no token (JWT, API key): anything", { scopes: ["usage:read"], databases: ["x"] }, undefined, null],
    ["a scope it holds, :read under :write", { scopes: ["inference", "jobs:read"], models: ["m1"] }, { ...token, databases: null }, null],
    ["no databases from a token limited to some: 400", { scopes: ["inference"], models: ["m1"] }, token, "platformAccess.databases"],
    ["a scope it lacks: 400", { scopes: ["usage:read"], models: ["m1"] }, token, "platformAccess.scopes"],
    ["a model outside its list: 400", { scopes: ["inference"], models: ["m2"] }, token, "platformAccess.models"],
    ["a database outside its list: 404, as on every route", { scopes: ["inference"], models: ["m1"], databases: ["db-2"] }, token, "notFound"],
    ["database roles without databases:write: 400", { scopes: ["databases:read"], models: ["m1"], databases: ["DB-1"] }, token, "platformAccess.databases"],
    ["database roles with databases:write and no list", { scopes: ["databases:write"], databases: ["db-9"] }, { ...withWrite, databases: null }, null],
  ])("gpu-scheduler platform access - %s", (_name, access, limits, expected) => {
    const problem = accessProblem(caller(limits), access);
    if (expected === null || expected === "notFound") expect(problem).toBe(expected);
    else expect(problem).toEqual({ field: expected, message: expect.any(String) });
  });
});

/** job_grants in memory: `live` says which jobs still run (the sweep's NOT EXISTS). */
class FakeGrantRows {
  rows = new Map<string, GrantRow & { settled: boolean }>();
  live = new Set<string>();
  async begin(jobId: string, attempt: number, databases: boolean, revokeEarlier: (earlier: GrantRow[]) => Promise<void>) {
    const earlier = [...this.rows.values()].filter((r) => r.job_id === jobId);
    if (earlier.length) await revokeEarlier(earlier);
    for (const r of earlier) this.rows.delete(`${r.job_id}/${r.attempt}`);
    this.rows.set(`${jobId}/${attempt}`, { job_id: jobId, attempt, databases, settled: false });
  }
  async settle(jobId: string, attempt: number) {
    this.rows.get(`${jobId}/${attempt}`)!.settled = true;
  }
  async claimEnded() {
    return [...this.rows.values()].filter((r) => r.settled && !this.live.has(r.job_id));
  }
  async release() {}
  async remove(g: GrantRow) {
    this.rows.delete(`${g.job_id}/${g.attempt}`);
  }
}

class FakeCalls implements PlatformCalls {
  log: string[] = [];
  failRole?: Error;
  failRevoke?: Error;
  async issueToken(p: { jobId: string; scopes: string[]; expiresInSeconds: number }) {
    this.log.push(`issue ${p.jobId} ${p.scopes.join(",")} ${p.expiresInSeconds}`);
    return { token: `cit_${"a".repeat(32)}` };
  }
  async revokeTokens(jobId: string) {
    if (this.failRevoke) throw this.failRevoke;
    this.log.push(`revokeTokens ${jobId}`);
  }
  async grantRole(p: { jobId: string; databaseId: string }) {
    if (this.failRole) throw this.failRole;
    this.log.push(`grantRole ${p.jobId} ${p.databaseId}`);
    return { database: `client_${p.databaseId}`, user: "job_0123456789abcdef", password: "p".repeat(32) };
  }
  async revokeRoles(jobId: string) {
    this.log.push(`revokeRoles ${jobId}`);
  }
}

const clientError = (code: number) => Object.assign(new Error("Database not found"), { code });

describe("gpu-scheduler platform grants", () => {
  const setUp = () => {
    const rows = new FakeGrantRows();
    const calls = new FakeCalls();
    return { rows, calls, grants: new PlatformGrants(rows, calls, quiet) };
  };
  const access: PlatformAccessParams = { scopes: ["inference"], databases: ["d1", "d2"] };

  test("gpu-scheduler platform grants - a token living the time limit plus a margin, a role per database in order, recorded and settled", async () => {
    const { rows, calls, grants } = setUp();
    const grant = await grants.grant({ clientId: "c", jobId: "j", attempt: 1, access, timeoutSeconds: 60 });
    expect(grant.databases.map((d) => d.database)).toEqual(["client_d1", "client_d2"]);
    expect(calls.log).toEqual(["issue j inference 360", "grantRole j d1", "grantRole j d2"]);
    expect([...rows.rows.values()]).toEqual([{ job_id: "j", attempt: 1, databases: true, settled: true }]);
  });

  test("gpu-scheduler platform grants - the sweep revokes ended attempts only, and keeps a grant whose revocation failed for the next sweep", async () => {
    const { rows, calls, grants } = setUp();
    await grants.grant({ clientId: "c", jobId: "ended", attempt: 1, access, timeoutSeconds: 60 });
    await grants.grant({ clientId: "c", jobId: "running", attempt: 1, access: { scopes: ["inference"] }, timeoutSeconds: 60 });
    rows.live.add("running");
    calls.log = [];
    calls.failRevoke = new Error("auth down");
    expect(await grants.sweep()).toBe(0);
    expect(rows.rows.size).toBe(2);
    calls.failRevoke = undefined;
    calls.log = [];
    expect(await grants.sweep()).toBe(1);
    expect(calls.log.sort()).toEqual(["revokeRoles ended", "revokeTokens ended"]);
    expect([...rows.rows.keys()]).toEqual(["running/1"]);
    rows.live.delete("running");
    calls.log = [];
    expect(await grants.sweep()).toBe(1);
    expect(calls.log).toEqual(["revokeTokens running"]); // no databases: dbaas is not asked
  });

  test("gpu-scheduler platform grants - a retry's grant revokes the earlier attempt's first", async () => {
    const { rows, calls, grants } = setUp();
    await grants.grant({ clientId: "c", jobId: "j", attempt: 1, access, timeoutSeconds: 60 });
    calls.log = [];
    await grants.grant({ clientId: "c", jobId: "j", attempt: 2, access: { scopes: ["inference"] }, timeoutSeconds: 60 });
    expect(calls.log.slice(0, 2).sort()).toEqual(["revokeRoles j", "revokeTokens j"]);
    expect(calls.log[2]).toBe("issue j inference 360");
    expect([...rows.rows.keys()]).toEqual(["j/2"]);
  });

  test.each([
    ["a refusal (404: the database is gone)", clientError(404), true],
    ["a fault (dbaas down)", new Error("timeout"), false],
  ])("gpu-scheduler platform grants - %s is a GrantFailed, the row settled for the sweep", async (_name, err, permanent) => {
    const { rows, calls, grants } = setUp();
    calls.failRole = err;
    const failed = await grants.grant({ clientId: "c", jobId: "j", attempt: 1, access, timeoutSeconds: 60 }).catch((e) => e);
    expect(failed).toBeInstanceOf(GrantFailed);
    expect(failed.permanent).toBe(permanent);
    expect(rows.rows.get("j/1")!.settled).toBe(true);
  });
});

describe("gpu-scheduler platform grants - dispatch", () => {
  const setUp = () => {
    const { clock, store, nodes, view, writer, stopper } = fakeCluster();
    const granted: string[] = [];
    let fail: GrantFailed | undefined;
    const grants = {
      grant: async (req: { jobId: string; attempt: number }) => {
        granted.push(`${req.jobId}/${req.attempt}`);
        if (fail) throw fail;
        return { token: `cit_${"b".repeat(32)}`, databases: [] };
      },
    };
    const loop = new PlacementLoop(store, writer, view, nodes, stopper, clock, quiet, undefined, undefined, grants);
    view.heard(heartbeat("node-a", ["GPU-1", "GPU-2"]), clock.ms);
    return { store, nodes, view, loop, granted, failWith: (e: GrantFailed) => (fail = e) };
  };

  test("gpu-scheduler platform grants - only a job with platformAccess gets a grant, in its run call", async () => {
    const { store, nodes, loop, granted } = setUp();
    const plain = store.add(randomUUID());
    const withAccess = store.add(randomUUID(), { platformAccess: { scopes: ["inference"] } });
    await loop.schedule({ newJob: true });
    await until(() => store.get(plain).status === "running" && store.get(withAccess).status === "running", "both jobs to run");
    expect(granted).toEqual([`${withAccess}/1`]);
    const runOf = (id: string) => nodes.runs.find((r) => r.jobId === id)!;
    expect(runOf(plain).platform).toBeUndefined();
    expect(runOf(withAccess).platform).toEqual({ token: `cit_${"b".repeat(32)}`, databases: [] });
    await loop.stop();
  });

  test.each([
    ["refused for good: the job fails and never reaches its node", true, "failed"],
    ["a fault: the job goes back to the queue, its node stays schedulable", false, "queued"],
  ])("gpu-scheduler platform grants - a grant %s", async (_name, permanent, status) => {
    const { store, nodes, view, loop, failWith } = setUp();
    failWith(new GrantFailed("Platform credentials could not be made: Database not found", permanent));
    const id = store.add(randomUUID(), { platformAccess: { scopes: ["databases:write"], databases: ["gone"] } });
    await loop.schedule({ newJob: true });
    await until(() => store.get(id).status === status && !loop.isDispatching(id), `the job to be ${status}`);
    expect(nodes.runs).toEqual([]);
    expect(view.schedulableCards().length).toBe(2);
    if (permanent) expect(store.get(id).errorMessage).toContain("Database not found");
    await loop.stop();
  });
});
