/**
 * bench:databases, the pooled endpoint (BENCH_ONLY=pooler) — BENCH_POOLER_CLIENTS (500) clients,
 * each opening a connection (SCRAM, node-postgres), sending one query and closing, through the
 * pooler (Debian's PgBouncer in transaction mode, TENANT_POOLER_PORT 6433) and directly to the
 * tenant server, same run:
 *   within the share: each side's clients at most the role's connection limit at once (as many as
 *     the server lets a direct client have), in chunks of 50 alternating which side goes first;
 *     each side has its own database (same table, same share), so the pooler's server connections
 *     never take a direct client's place;
 *   all at once: the 500 started together through the pooler, with the role's server connections
 *     watched. Direct, that many would be refused past the role's limit (and take slots of the
 *     shared server's max_connections from other users): not run.
 * Figures: queries/s (clients served ÷ wall time) and p50/p99 of connect + query + close.
 */
import { Client } from "pg";
import { asAdmin, withClient } from "../test/integration/dbaas.helpers";
import { Api, call, Created } from "./databases-snapshots";
import { startBenchPlatform } from "./databases-platform";

const POOLER_PORT = Number(process.env.TENANT_POOLER_PORT ?? 6433);
const CLIENTS = Number(process.env.BENCH_POOLER_CLIENTS || 500);
const CHUNK = 50;
type Pooled = Created & { pooledConnectionString?: string };
type Run = { samples: number[]; failures: number; firstError?: string; wallMs: number };

/** One client: connect, one query, close; its time in ms. */
async function oneClient(url: string): Promise<number> {
  const start = performance.now();
  const client = new Client({ connectionString: url });
  client.on("error", () => undefined);
  try {
    await client.connect();
    await client.query("SELECT note FROM t WHERE id = 42");
  } finally {
    await client.end().catch(() => undefined);
  }
  return performance.now() - start;
}

/** `count` clients, at most `concurrency` at once. */
async function clients(url: string, count: number, concurrency: number, into: Run): Promise<void> {
  let next = 0;
  const start = performance.now();
  const worker = async () => {
    while (next < count) {
      next++;
      try {
        into.samples.push(await oneClient(url));
      } catch (err) {
        into.failures++;
        into.firstError ??= String(err);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker));
  into.wallMs += performance.now() - start;
}

const newRun = (): Run => ({ samples: [], failures: 0, wallMs: 0 });
const rank = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)] ?? NaN;
};
const qps = (r: Run) => r.samples.length / (r.wallMs / 1000);

async function roleSessions(username: string): Promise<number> {
  return asAdmin(async (c) => Number((await c.query("SELECT count(*) AS n FROM pg_stat_activity WHERE usename = $1", [username])).rows[0].n));
}

async function prepare(api: Api): Promise<{ db: Pooled; share: number }> {
  const db: Pooled = await call(api, "POST", "/api/databases");
  if (!db.pooledConnectionString) throw new Error("no pooledConnectionString: the platform has no DBAAS_POOLED_PORT");
  await withClient(db.connectionString, (c) =>
    c.query("CREATE TABLE t (id int PRIMARY KEY, note text); INSERT INTO t SELECT g, md5(g::text) FROM generate_series(1, 1000) g"),
  );
  const share = await asAdmin(async (c) => Number((await c.query("SELECT rolconnlimit FROM pg_roles WHERE rolname = $1", [db.username])).rows[0].rolconnlimit));
  return { db, share };
}

export async function benchPooler(): Promise<void> {
  // Two databases of one account, 10 connections each: the server's limit of a direct client.
  const platform = await startBenchPlatform({ DBAAS_CONNECTIONS_PER_ACCOUNT: "20", DBAAS_CONNECTION_LIMIT: "10" }, { DBAAS_POOLED_PORT: String(POOLER_PORT) });
  try {
    const pooled = await prepare(platform);
    const direct = await prepare(platform);
    const pooledUrl = pooled.db.pooledConnectionString as string;
    const share = Math.min(pooled.share, direct.share);
    // Warm-up: the pooler's server connections and its lookup, the server's caches, the client's code paths.
    await clients(pooledUrl, 20, share, newRun());
    await clients(direct.db.connectionString, 20, share, newRun());

    const within = { pooler: newRun(), direct: newRun() };
    for (let done = 0, i = 0; done < CLIENTS; done += CHUNK, i++) {
      const n = Math.min(CHUNK, CLIENTS - done);
      const sides: Array<[string, Run]> = [
        [pooledUrl, within.pooler],
        [direct.db.connectionString, within.direct],
      ];
      for (const [url, run] of i % 2 ? sides.reverse() : sides) await clients(url, n, share, run);
    }

    const burst = newRun();
    let peak = 0;
    let watching = true;
    const watch = (async () => {
      while (watching) {
        peak = Math.max(peak, await roleSessions(pooled.db.username));
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
    await clients(pooledUrl, CLIENTS, CLIENTS, burst);
    watching = false;
    await watch;

    const f = (x: number) => `${x.toFixed(1)} ms`.padStart(11);
    const row = (label: string, r: Run) =>
      console.log(
        `${label.padEnd(40)}${String(r.samples.length).padStart(5)}${String(r.failures).padStart(7)}${qps(r).toFixed(0).padStart(9)}${f(rank(r.samples, 50))}${f(rank(r.samples, 99))}`,
      );
    console.log(
      `\nbench:databases — pooled connections: ${CLIENTS} clients, each a new connection for one query (PgBouncer 127.0.0.1:${POOLER_PORT}, transaction mode)`,
    );
    console.log(`role's connection limit (share) ${share}; chunks of ${CHUNK} alternating\n`);
    console.log(`${"".padEnd(40)}${"ok".padStart(5)}${"failed".padStart(7)}${"q/s".padStart(9)}${"p50".padStart(11)}${"p99".padStart(11)}`);
    row(`pooler, ${share} at once`, within.pooler);
    row(`direct, ${share} at once`, within.direct);
    row(`pooler, all ${CLIENTS} at once`, burst);
    console.log(`direct, all ${CLIENTS} at once: not run (refused past the role's limit of ${share})`);
    console.log(
      `\npooler / direct at ${share} at once: q/s ${(qps(within.pooler) / qps(within.direct)).toFixed(2)}×, p99 ${(rank(within.pooler.samples, 99) / rank(within.direct.samples, 99)).toFixed(2)}×`,
    );
    console.log(`all ${CLIENTS} at once through the pooler: at most ${peak} server connections of the role (share ${share})`);
    for (const [label, r] of [
      ["pooler", within.pooler],
      ["direct", within.direct],
      ["burst", burst],
    ] as const)
      if (r.firstError) console.log(`first failure (${label}): ${r.firstError}`);
    await call(platform, "DELETE", `/api/databases/${pooled.db.id}`);
    await call(platform, "DELETE", `/api/databases/${direct.db.id}`);
  } finally {
    await platform.stop();
  }
}
