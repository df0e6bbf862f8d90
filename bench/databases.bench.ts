/**
 * bench:databases — provisioning latency (POST /api/databases, p50/p99) sequentially and at 10
 * concurrent, beside a bare script sending the same CREATE ROLE + CREATE DATABASE + REVOKE/GRANT
 * statements (the schema step, catalog level included, from tenant-sql.ts) to the same tenant server over a plain pg Pool, in the same run (alternating, so
 * other load on the machine falls on both alike); and the ratio. Both run at the concurrency the
 * platform allows: 10 tenant-server connections, at most DBAAS_CREATE_CONCURRENCY CREATE DATABASE at once.
 * Goal: platform ≤ 1.3× the bare script. Needs the tenant cluster (.ci/setup.d/30-tenant-postgres.sh).
 * Further sections (BENCH_ONLY=<name> runs one): the quota overshoot, point-in-time restore
 * (databases-pitr.ts, needs the WAL archive) and the pooler (databases-pooler.ts, needs PgBouncer on 6433).
 */
import { randomBytes } from "crypto";
import { Client, Pool } from "pg";
import { http, waitFor } from "../test/support/platform";
import { callerMeta, databaseBytes, startDbaasPlatform, stopDbaasPlatform, TENANT_ADMIN_URL, tenantEnv, withClient } from "../test/integration/dbaas.helpers";
import type { DatabaseCreated, DatabaseDetail } from "../services/dbaas/dbaas.service";
import { worstOvershootMb } from "../services/dbaas/quota-activity";
import { parseCatalogLevel, parseDbaasSettings } from "../services/dbaas/settings";
import { prepareSchemaSql, tempFileLimitSql } from "../services/dbaas/tenant-sql";
import { mkdtempSync } from "fs";
import { tmpdir } from "os";
import { join } from "path";
import { benchSnapshots, snapshotBenchEnv } from "./databases-snapshots";
import { startBenchPlatform } from "./databases-platform";
import { benchPitr } from "./databases-pitr";
import { benchPooler } from "./databases-pooler";

const SEQUENTIAL = Number(process.env.BENCH_SEQUENTIAL || 20);
const CONCURRENCY = 10;
const ROUNDS = Number(process.env.BENCH_ROUNDS || 4);

type Figures = { n: number; p50: number; p99: number; mean: number; wallMs: number };

function figures(samples: number[], wallMs: number): Figures {
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = (p: number) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
  return { n: sorted.length, p50: rank(50), p99: rank(99), mean: sorted.reduce((a, b) => a + b, 0) / sorted.length, wallMs };
}

async function timed(work: () => Promise<void>): Promise<[number]> {
  const start = performance.now();
  await work();
  return [performance.now() - start];
}

/**
 * Both sides in alternation — one operation (or one round of `concurrency`) of each in turn —
 * so load from anything else on the machine falls on both alike.
 */
async function runAlternating(sides: Array<() => Promise<void>>, count: number, concurrency: number): Promise<Figures[]> {
  const samples: number[][] = sides.map(() => []);
  const wall = sides.map(() => 0);
  for (let done = 0; done < count; done += concurrency) {
    for (const [i, op] of sides.entries()) {
      const start = performance.now();
      const batch = await Promise.all(Array.from({ length: Math.min(concurrency, count - done) }, () => timed(op)));
      wall[i] += performance.now() - start;
      samples[i].push(...batch.map(([ms]) => ms));
    }
  }
  return samples.map((s, i) => figures(s, wall[i]));
}

/** The tenant-server connections dbaas keeps (TenantServer's default pool size). */
const TENANT_POOL_SIZE = 10;

/**
 * The bare baseline: the same tenant-side statements, no platform around them, at the platform's
 * concurrency: CREATE DATABASE on its own pool of `createConcurrency` connections, as dbaas does,
 * so at most that many run at once.
 */
class Bare {
  private readonly pool = new Pool({ connectionString: TENANT_ADMIN_URL, max: TENANT_POOL_SIZE });
  private readonly createPool: Pool;
  readonly made: Array<{ db: string; user: string }> = [];

  constructor(createConcurrency: number) {
    this.createPool = new Pool({ connectionString: TENANT_ADMIN_URL, max: createConcurrency });
  }

  async provision(): Promise<void> {
    const hex = randomBytes(6).toString("hex");
    const user = `user_${hex}`;
    const db = `client_benchbar_${randomBytes(4).toString("hex")}`;
    const password = randomBytes(24).toString("base64url");
    this.made.push({ db, user });
    await this.pool.query(
      `CREATE ROLE "${user}" LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT NOREPLICATION NOBYPASSRLS CONNECTION LIMIT 1 PASSWORD '${password}'`,
    );
    await this.pool.query(tempFileLimitSql(user, 1024));
    await this.createPool.query(`CREATE DATABASE "${db}" TEMPLATE template0`);
    await this.pool.query(`REVOKE CONNECT, TEMPORARY ON DATABASE "${db}" FROM PUBLIC; GRANT CONNECT, TEMPORARY, CREATE ON DATABASE "${db}" TO "${user}"`);
    const url = new URL(TENANT_ADMIN_URL);
    url.pathname = `/${db}`;
    // The schema step as the platform sends it (public schema, large objects, the catalog level).
    await withClient(url.toString(), (c: Client) =>
      c.query(prepareSchemaSql({ databaseName: db, username: user }, parseCatalogLevel(process.env.DBAAS_HIDE_CATALOG))),
    );
  }

  async cleanup(): Promise<void> {
    for (const { db, user } of this.made.splice(0)) {
      await this.pool.query(`DROP DATABASE IF EXISTS "${db}" WITH (FORCE)`);
      await this.pool.query(`DROP ROLE IF EXISTS "${user}"`);
    }
  }

  end = () => Promise.all([this.pool.end(), this.createPool.end()]);
}

const fmt = (ms: number) => `${ms.toFixed(1)} ms`.padStart(10);

async function main() {
  // One account holds every database here: one connection each keeps its budget within the server's room.
  const limits = { DBAAS_MAX_PER_ACCOUNT: "1000", DBAAS_CONNECTIONS_PER_ACCOUNT: "60", DBAAS_CONNECTION_LIMIT: "1" };
  const snapshotDir = mkdtempSync(join(tmpdir(), "bench-snapshots-")); // BENCH_PART: provisioning, snapshots or both (unset)
  // The platform's limit, read as dbaas reads it, and handed to both sides.
  const { createConcurrency } = parseDbaasSettings({ ...process.env, ...tenantEnv(limits) });
  const platform = await startBenchPlatform(limits, { ...snapshotBenchEnv(snapshotDir), DBAAS_CREATE_CONCURRENCY: String(createConcurrency) });
  const { base, token } = platform;
  const bare = new Bare(createConcurrency);
  try {
    if (process.env.BENCH_PART !== "provisioning")
      await benchSnapshots({ base, token }, snapshotDir).catch((err) => Promise.reject(new Error(`${err}\nplatform: ${platform.proc.output().slice(-4000)}`)));
    if (process.env.BENCH_PART === "snapshots") return;

    const platformIds: string[] = [];
    const provision = async () => {
      const res = await http(base, "POST", "/api/databases", { token });
      if (res.status !== 201) throw new Error(`POST /api/databases: ${res.status} ${res.text}`);
      platformIds.push(res.body.id);
    };
    const destroyAll = async () => {
      for (const id of platformIds.splice(0)) await http(base, "DELETE", `/api/databases/${id}`, { token });
    };

    // Warm-up: connections, JIT, the first CREATE DATABASE.
    await provision();
    await bare.provision();
    await destroyAll();
    await bare.cleanup();

    const rows: Array<[string, Figures]> = [];
    for (const [mode, count, concurrency] of [
      ["sequential", SEQUENTIAL, 1],
      [`${CONCURRENCY} concurrent`, CONCURRENCY * ROUNDS, CONCURRENCY],
    ] as const) {
      const [b, p] = await runAlternating([() => bare.provision(), provision], count, concurrency);
      rows.push([`bare, ${mode}`, b], [`platform, ${mode}`, p]);
      await bare.cleanup();
      await destroyAll();
    }

    console.log(`\nbench:databases — provisioning on ${new URL(TENANT_ADMIN_URL).host}`);
    console.log(`both sides: ${TENANT_POOL_SIZE} tenant-server connections, at most ${createConcurrency} CREATE DATABASE at once (DBAAS_CREATE_CONCURRENCY)\n`);
    console.log(`${"".padEnd(26)}${"n".padStart(4)}${"p50".padStart(10)}${"p99".padStart(10)}${"mean".padStart(10)}${"wall".padStart(12)}`);
    for (const [label, f] of rows)
      console.log(`${label.padEnd(26)}${String(f.n).padStart(4)}${fmt(f.p50)}${fmt(f.p99)}${fmt(f.mean)}${fmt(f.wallMs).padStart(12)}`);
    const by = Object.fromEntries(rows);
    console.log("");
    for (const mode of ["sequential", `${CONCURRENCY} concurrent`]) {
      const p = by[`platform, ${mode}`];
      const b = by[`bare, ${mode}`];
      const r50 = p.p50 / b.p50;
      const r99 = p.p99 / b.p99;
      console.log(`platform / bare, ${mode.padEnd(14)} p50 ${r50.toFixed(2)}×   p99 ${r99.toFixed(2)}×   (goal ≤ 1.3×: ${r50 <= 1.3 ? "met" : "missed"})`);
    }
  } finally {
    await bare.cleanup().catch(() => undefined);
    await bare.end();
    await platform.stop();
  }
}

/**
 * Worst-case quota overshoot with the default quota settings (issue 20): OVERSHOOT_SESSIONS
 * sessions insert 2 MB per statement as fast as they can into a database with a small quota
 * until the freeze refuses them; prints the largest size reached against the quota, the write
 * rate, the time to freeze, and the README's formula (rate × effective interval) beside it.
 */
async function overshoot(): Promise<void> {
  const sessions = Number(process.env.OVERSHOOT_SESSIONS || 4);
  const quotaMb = Number(process.env.OVERSHOOT_QUOTA_MB || 20);
  const defaults = parseDbaasSettings({}); // the shipped quota tick, full round and busy threshold
  const platform = await startDbaasPlatform({
    env: {
      DBAAS_MAX_STORAGE_MB: String(quotaMb),
      DBAAS_QUOTA_CHECK_S: String(defaults.quotaCheckS),
      DBAAS_QUOTA_NEAR_CHECK_S: String(defaults.quotaNearCheckS),
      DBAAS_QUOTA_BUSY_ROWS: String(defaults.quotaBusyRows),
    },
  });
  try {
    const meta = callerMeta();
    const db = await platform.broker.call<DatabaseCreated, object>("dbaas.create", {}, { meta });
    await withClient(db.connectionString, (c) => c.query("CREATE TABLE big (id bigserial PRIMARY KEY, payload text NOT NULL)"));
    const startBytes = await databaseBytes(db.databaseName);
    let frozen = false;
    let maxBytes = startBytes;
    const writer = () =>
      withClient(db.connectionString, async (c) => {
        while (!frozen) await c.query("INSERT INTO big (payload) SELECT md5(random()::text) || repeat('x', 968) FROM generate_series(1, 2000)");
      }).catch(() => undefined); // refused or ended by the freeze
    const start = performance.now();
    const writers = Array.from({ length: sessions }, writer);
    let frozenMs = NaN;
    await waitFor(
      async () => {
        maxBytes = Math.max(maxBytes, await databaseBytes(db.databaseName));
        const { readOnly } = await platform.broker.call<DatabaseDetail, object>("dbaas.get", { id: db.id }, { meta });
        if (readOnly && Number.isNaN(frozenMs)) frozenMs = performance.now() - start;
        return readOnly;
      },
      { timeoutMs: 120_000, intervalMs: 100, message: "the freeze" },
    );
    frozen = true;
    await Promise.all(writers);
    maxBytes = Math.max(maxBytes, await databaseBytes(db.databaseName));
    const mb = (bytes: number) => bytes / MIB_BYTES;
    const rate = (mb(maxBytes) - mb(startBytes)) / (frozenMs / 1000);
    const over = mb(maxBytes) - quotaMb;
    console.log(
      `\nbench:databases — quota overshoot, default settings (tick DBAAS_QUOTA_NEAR_CHECK_S ${defaults.quotaNearCheckS} s, full round ${defaults.quotaCheckS} s, busy ${defaults.quotaBusyRows} rows)`,
    );
    console.log(`${sessions} sessions inserting 2 MB per statement as fast as they can, quota ${quotaMb} MiB, empty database ${mb(startBytes).toFixed(1)} MiB`);
    console.log(`frozen after ${(frozenMs / 1000).toFixed(2)} s at ${rate.toFixed(1)} MiB/s`);
    console.log(`size reached ${mb(maxBytes).toFixed(1)} MiB = ${(mb(maxBytes) / quotaMb).toFixed(2)}× the quota (overshoot ${over.toFixed(1)} MiB)`);
    console.log(
      `README formula at this rate: up to ${worstOvershootMb(rate, defaults.quotaNearCheckS).toFixed(1)} MiB over (rate × (tick + 1 s flush lag + 0.5 s enforcement))`,
    );
  } finally {
    await stopDbaasPlatform(platform);
  }
}

const MIB_BYTES = 1048576;

/** The sections, in order; BENCH_ONLY=<name> runs one alone (provisioning: the latency, snapshot and branch section). */
const SECTIONS: Record<string, () => Promise<void>> = { provisioning: main, overshoot, pitr: benchPitr, pooler: benchPooler };

async function run(): Promise<void> {
  const only = process.env.BENCH_ONLY;
  if (only && !SECTIONS[only]) throw new Error(`BENCH_ONLY: one of ${Object.keys(SECTIONS).join(", ")}`);
  for (const [name, section] of Object.entries(SECTIONS)) if (!only || only === name) await section();
}

run().catch((err) => {
  console.error(err);
  process.exit(1);
});
