/**
 * Shared by the dbaas tests: the tenant PostgreSQL cluster (.ci/setup.d/30-tenant-postgres.sh),
 * a platform running dbaas against it, tenant connections, and removal of everything a test
 * platform created there (only objects carrying that platform's marker).
 */
import { spawnSync } from "child_process";
import { rm } from "fs/promises";
import { randomUUID } from "crypto";
import { Client } from "pg";
import type { Caller } from "../../lib/identity";
import { liveCallerMeta } from "../../lib/caller-keys";
import type { DbaasApp, WithApp } from "../../services/dbaas/app";
import { Provisioner, ProvisionStep } from "../../services/dbaas/provisioner";
import { holdRoleOf, TenantNames } from "../../services/dbaas/naming";
import { ChildService, dbaasDefaults, startTestPlatform, TENANT_ADMIN_URL, TestPlatform, uniqueName, waitFor } from "../support/platform";
import { NatsPlatform, NatsPlatformOptions, startNatsPlatform } from "../support/nats-platform";

export { TENANT_ADMIN_URL };

const tenantUrl = new URL(TENANT_ADMIN_URL);

/** dbaas pointed at the tenant cluster, answering with host/port that really reach it. */
export function tenantEnv(extra: Record<string, string> = {}): Record<string, string> {
  return {
    DBAAS_ADMIN_URL: TENANT_ADMIN_URL,
    DBAAS_PUBLIC_HOST: tenantUrl.hostname,
    DBAAS_PUBLIC_PORT: tenantUrl.port || "5432",
    DBAAS_QUOTA_CHECK_S: "3600", // tests trigger checks themselves
    DBAAS_RECONCILE_S: "3600",
    DBAAS_QUOTA_NEAR_CHECK_S: "3600",
    ...extra,
  };
}

export async function startDbaasPlatform(opts: { services?: string[]; env?: Record<string, string> } = {}): Promise<TestPlatform> {
  return startTestPlatform({ services: opts.services ?? ["dbaas"], env: tenantEnv(opts.env) });
}

/** A platform over NATS (test/support/nats-platform.ts) whose dbaas processes provision on the tenant cluster, into one snapshot folder. */
export function startDbaasNatsPlatform(opts: NatsPlatformOptions = {}): Promise<NatsPlatform> {
  return startNatsPlatform({ ...opts, env: tenantEnv({ DBAAS_SNAPSHOT_DIR: dbaasDefaults().DBAAS_SNAPSHOT_DIR, ...opts.env }) });
}

/** What stopDbaasPlatform needs of a platform, in this process or over NATS. */
type DbaasPlatform = { databaseUrl: string; env: Record<string, string | undefined>; stop(): Promise<void> };

// Signed like the gateway's (and kept fresh): services take the caller from the token only (middlewares/auth.middleware.ts).
export const callerMeta = (clientId: string = randomUUID()): { caller: Caller; callerToken: string } =>
  liveCallerMeta({ clientId, role: "client", via: "jwt" });

/** Runs `work` on a fresh connection as the tenant admin (to `database`, default postgres). */
export async function asAdmin<T>(work: (client: Client) => Promise<T>, database = "postgres"): Promise<T> {
  const url = new URL(TENANT_ADMIN_URL);
  url.pathname = `/${database}`;
  return withClient(url.toString(), work);
}

export async function withClient<T>(connectionString: string, work: (client: Client) => Promise<T>): Promise<T> {
  const client = new Client({ connectionString });
  client.on("error", () => undefined); // a terminated session must fail its queries, not the process
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** Resolves with the SQLSTATE (or message) the statement fails with; rejects if it succeeds. */
export async function refusal(client: Client, sql: string): Promise<string> {
  try {
    await client.query(sql);
  } catch (err) {
    return String((err as { code?: string }).code ?? (err as Error).message);
  }
  throw new Error(`Expected a refusal, but this succeeded: ${sql}`);
}

/** The SQLSTATE connecting fails with; rejects if it connects. */
export async function connectRefusal(connectionString: string): Promise<string> {
  try {
    await withClient(connectionString, async () => undefined);
  } catch (err) {
    return String((err as { code?: string }).code ?? (err as Error).message);
  }
  throw new Error("Expected the connection to be refused");
}

export async function existing(names: { databases?: string[]; roles?: string[] }): Promise<string[]> {
  return asAdmin(async (client) => {
    const { rows } = await client.query<{ name: string }>(
      `SELECT datname AS name FROM pg_database WHERE datname = ANY($1::text[])
       UNION ALL SELECT rolname FROM pg_roles WHERE rolname = ANY($2::text[])`,
      [names.databases ?? [], names.roles ?? []],
    );
    return rows.map((r) => r.name).sort();
  });
}

export async function markerOf(platform: { databaseUrl: string }): Promise<string> {
  return withClient(platform.databaseUrl, async (client) => {
    const { rows } = await client.query<{ id: string }>("SELECT id FROM dbaas.instance");
    return `ci-platform:dbaas:${rows[0].id}`;
  });
}

/** Drops every database and role on the tenant cluster that carries `marker`. */
export async function purgeMarked(marker: string): Promise<void> {
  await asAdmin(async (client) => {
    const { rows } = await client.query<{ kind: string; name: string }>(
      `SELECT 'database' AS kind, d.datname AS name FROM pg_database d
         JOIN pg_shdescription s ON s.objoid = d.oid AND s.classoid = 'pg_database'::regclass WHERE s.description = $1
       UNION ALL
       SELECT 'role', r.rolname FROM pg_roles r
         JOIN pg_shdescription s ON s.objoid = r.oid AND s.classoid = 'pg_authid'::regclass WHERE s.description = $1`,
      [marker],
    );
    for (const row of rows.filter((r) => r.kind === "database")) await client.query(`DROP DATABASE IF EXISTS "${row.name}" WITH (FORCE)`);
    for (const row of rows.filter((r) => r.kind === "role")) await client.query(`DROP ROLE IF EXISTS "${row.name}"`);
  });
}

/** Stops a dbaas platform after removing what it created on the tenant cluster. */
export async function stopDbaasPlatform(platform: DbaasPlatform | undefined): Promise<void> {
  if (!platform) return;
  const marker = await markerOf(platform).catch(() => undefined);
  await platform.stop();
  if (marker) await purgeMarked(marker);
  // Its own snapshot folder (test/support/platform.ts dbaasDefaults), never a shared one.
  const dir = platform.env.DBAAS_SNAPSHOT_DIR;
  if (dir?.includes("ci-platform-test-snapshots")) await rm(dir, { recursive: true, force: true });
}

/** Runs `sql` with the real psql client (no .psqlrc, stop on the first error): its exit code and output. */
export function psql(connectionString: string, ...commands: string[]): { status: number; stdout: string; stderr: string } {
  const args = ["-X", "-v", "ON_ERROR_STOP=1", "-At", connectionString, ...commands.flatMap((c) => ["-c", c])];
  const run = spawnSync("psql", args, { encoding: "utf8", timeout: 30_000 });
  return { status: run.status ?? -1, stdout: run.stdout, stderr: run.stderr };
}

/** The size of a database on the tenant cluster, in bytes. */
export async function databaseBytes(databaseName: string): Promise<number> {
  return asAdmin(async (c) => Number((await c.query("SELECT pg_database_size($1) AS bytes", [databaseName])).rows[0].bytes));
}

/** The app of the platform's dbaas (services/dbaas/app.ts): its provisioner, tenant server, repositories, snapshotter. */
export const dbaasApp = (platform: TestPlatform): DbaasApp => (platform.broker.getLocalService("dbaas") as unknown as WithApp).app;

export async function records(platform: TestPlatform): Promise<Array<{ database_name: string; status: string }>> {
  return withClient(platform.databaseUrl, async (client) => (await client.query("SELECT database_name, status FROM dbaas.databases")).rows);
}

export const namesOf = (n: TenantNames) => ({ databases: [n.databaseName], roles: [n.username, n.holdRole] });

type Method = (...args: never[]) => Promise<unknown>;
type Taps<T> = { [K in keyof T]?: T[K] extends Method ? { before?: (...args: Parameters<T[K]>) => void; after?: () => void } : never };

/** `target` with `before` run ahead of, and `after` run once each call has answered; a throw there fails the call. */
export function tapped<T extends object>(target: T, taps: Taps<T>): T {
  return new Proxy(target, {
    get(t, key) {
      const value: unknown = Reflect.get(t, key, t);
      if (typeof value !== "function") return value;
      const tap = taps[key as keyof T] as { before?: (...args: unknown[]) => void; after?: () => void } | undefined;
      if (!tap) return value.bind(t);
      return async (...args: unknown[]) => {
        tap.before?.(...args);
        const result: unknown = await value.apply(t, args);
        tap.after?.();
        return result;
      };
    },
  });
}

/**
 * Swaps the platform's provisioner for one whose repository and tenant server call `onStep` as each
 * provisioning step ends (a throw there is a failure of that step): "record" when the next step
 * starts reading, the tenant steps once the server has answered, "restore" once a branch's snapshot is restored, "activate" once the record is active.
 * Returns the original, to put back.
 */
export function injectFaults(platform: TestPlatform, onStep: (step: ProvisionStep, names: TenantNames) => void): Provisioner {
  const service = dbaasApp(platform);
  const original = service.provisioner;
  const { repo, tenant } = original.deps;
  let names: TenantNames | undefined;
  let recorded = false;
  const ended = (step: ProvisionStep) => () => onStep(step, names!);
  service.provisioner = new Provisioner({
    ...original.deps,
    repo: tapped(repo, {
      insertProvisioning: {
        before: (row) => {
          names = { databaseName: row.databaseName, username: row.username, holdRole: holdRoleOf(row.username) };
          recorded = false;
        },
      },
      listLive: {
        before: () => {
          if (recorded) return;
          recorded = true;
          onStep("record", names!);
        },
      },
      activate: { after: ended("activate") },
    }),
    tenant: tapped(tenant, {
      createRoleWithin: { after: ended("role") },
      createDatabase: { after: ended("database") },
      secureDatabase: { after: ended("grants") },
      prepareSchema: { after: ended("schema") },
      // A branch measures its database right after its restore: the end of that step.
      measure: { after: ended("restore") },
    }),
  });
  return original;
}

/** dbaas in one more process of `platform`, once its local broker sees it. */
export async function spawnDbaasBeside(platform: NatsPlatform, env: Record<string, string>): Promise<{ child: ChildService; nodeID: string }> {
  const nodeID = uniqueName("dbaas");
  const child = platform.spawn(["dbaas"], { ...tenantEnv({ DBAAS_CREATE_CONCURRENCY: "1", ...env }), NODE_ID: nodeID });
  const registry = platform.local!.broker.registry;
  await platform.waitFor(() => registry.getServiceList({ onlyAvailable: true }).some((s) => s.name === "dbaas" && s.nodeID === nodeID), {
    timeoutMs: 30_000,
    message: "dbaas in its own process",
  });
  return { child, nodeID };
}

/** The account's records in the platform's state database. */
export const accountRecords = (platform: { databaseUrl: string }, clientId: string): Promise<Array<{ username: string; status: string }>> =>
  withClient(platform.databaseUrl, async (c) => (await c.query("SELECT username, status FROM dbaas.databases WHERE client_id = $1", [clientId])).rows);

/**
 * Fault injected mid-provision, then a crash: holds the only CREATE DATABASE slot of the child
 * (spawnDbaasBeside runs it with DBAAS_CREATE_CONCURRENCY=1), so its provisioning for `meta`'s
 * account (asked from the platform's local broker) stops after the record and the role, and SIGKILLs it there. Returns that record.
 */
export async function killMidProvision(
  platform: NatsPlatform,
  replica: { child: ChildService; nodeID: string },
  meta: ReturnType<typeof callerMeta>,
): Promise<{ username: string; status: string }> {
  const client = platform.local!.broker;
  return asAdmin(async (slot) => {
    await slot.query("SELECT pg_advisory_lock(hashtext('ci-platform:dbaas:create'), 0)");
    // Calls go to that node only; this one fails once the broker notices the node is gone.
    void client.call("dbaas.create", {}, { meta, nodeID: replica.nodeID, timeout: 2000 }).catch(() => undefined);
    const [row] = await waitFor(
      async () => {
        const r = await accountRecords(platform, meta.caller.clientId);
        return r.length === 1 && (await existing({ roles: [r[0].username] })).length === 1 ? r : false;
      },
      { message: "the provisioning to reach CREATE DATABASE" },
    );
    await replica.child.stop("SIGKILL");
    return row;
  });
}
