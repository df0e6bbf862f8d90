/**
 * bench:databases, point-in-time restore (BENCH_ONLY=pitr) — the time to a ready restored database
 * through the platform (POST /api/databases {restoreFrom} until its 201) beside the same restore
 * done by hand on the same data in the same run, alternating which goes first:
 *   pg_switch_wal() and waiting for the archiver; `cp -a` of a pg_basebackup; `pg_ctl start -w`
 *   with recovery.signal, restore_command and recovery_target_time (promote); `pg_dump -Fc` of the
 *   one database; `pg_ctl stop`; CREATE DATABASE + `pg_restore --single-transaction`.
 * Both restore from the same base backup, taken by hand with pg_basebackup before the source is
 * filled (timed and printed: the platform takes it on a schedule, outside the restore) and handed
 * to the platform as its own (DBAAS_PITR_DIR/base with its dbaas-backup.json), so the platform
 * takes none and never prunes the tenant cluster's shared WAL archive. Goal ≤ 1.2×.
 * Size: BENCH_PITR_MB (100); BENCH_PITR_REPS (3) restores each.
 */
import { spawnSync } from "child_process";
import { promises as fs, existsSync } from "fs";
import os from "os";
import path from "path";
import { randomBytes } from "crypto";
import { TENANT_ADMIN_URL, withClient } from "../test/integration/dbaas.helpers";
import { waitFor } from "../test/support/platform";
import { debianBinDir } from "../services/dbaas/pg-tools";
import { adminQuery, Api, call, Created, fill, median, timed, tool } from "./databases-snapshots";
import { startBenchPlatform } from "./databases-platform";
import { PlatformPhases, watchRestore } from "./databases-pitr-watch";

const WAL_DIR = process.env.TENANT_PG_WAL_ARCHIVE ?? "/var/lib/postgresql/pitr/tenant/wal";
const SIZE_MB = Number(process.env.BENCH_PITR_MB || 100);
const REPS = Number(process.env.BENCH_PITR_REPS || 3);
const PHASES = ["archive", "copy", "recovery", "dump", "restore"] as const;
type Phase = (typeof PHASES)[number];

const ms = (x: number) => `${x.toFixed(0)} ms`.padStart(10);

/** The by-hand side: one base backup, then restores from a copy of it. */
class ByHand {
  readonly bin: (tool: string) => string;
  readonly made: string[] = [];

  constructor(
    private readonly root: string,
    readonly backupDir: string,
    major: number,
  ) {
    const dir = debianBinDir(major);
    this.bin = (t) => (dir ? path.join(dir, t) : t);
  }

  /** pg_basebackup as the platform stores one (plain, WAL streamed), with the platform's metadata. */
  async baseBackup(): Promise<void> {
    const partial = `${this.backupDir}.partial`;
    const startedAt = new Date();
    tool(this.bin("pg_basebackup"), ["-D", partial, "-Fp", "-X", "stream", "-c", "fast"], "postgres");
    await fs.writeFile(path.join(partial, "dbaas-backup.json"), JSON.stringify({ startedAt, endedAt: new Date() }));
    await fs.rename(partial, this.backupDir);
  }

  /** Restores `source` as of `target` into a new database; the time of each phase. */
  async restore(source: string, target: Date): Promise<Record<Phase, number>> {
    const took = {} as Record<Phase, number>;
    const dir = await fs.mkdtemp(path.join(this.root, "bare-"));
    const data = path.join(dir, "data");
    const asPostgres = (args: string[]) => command("runuser", ["-u", "postgres", "--", this.bin("pg_ctl"), ...args]);
    const db = `client_benchpitr_${randomBytes(4).toString("hex")}`;
    try {
      took.archive = await timed(() => archiveNow());
      took.copy = await timed(async () => {
        command("cp", ["-a", this.backupDir, data]);
        await fs.rm(path.join(data, "dbaas-backup.json"));
        await fs.writeFile(path.join(data, "recovery.signal"), "");
        await fs.writeFile(path.join(data, "postgresql.auto.conf"), "");
        await fs.writeFile(path.join(dir, "pg_hba.conf"), "local all all trust\n");
        await fs.writeFile(path.join(dir, "postgresql.conf"), recoveryConf(dir, target));
        command("chown", ["-R", "postgres:postgres", dir]);
        await fs.chmod(dir, 0o700);
        await fs.chmod(data, 0o700);
      });
      const conf = `-c config_file=${path.join(dir, "postgresql.conf")}`;
      // pg_ctl -w returns once recovery starts (hot_standby off); pg_isready answers 0 once promoted.
      took.recovery = await timed(async () => {
        asPostgres(["-D", data, "-o", conf, "-l", path.join(dir, "server.log"), "-w", "-t", "600", "start"]);
        const deadline = Date.now() + 600_000;
        while (!(await ready(dir, data))) {
          if (Date.now() > deadline) throw new Error("the recovery did not finish within 600 s");
          await new Promise((r) => setTimeout(r, 100));
        }
      });
      const socket = { PGHOST: dir, PGPORT: "5432", PGPASSWORD: "" };
      const dump = path.join(dir, "database.dump");
      took.dump = await timed(async () => {
        tool(this.bin("pg_dump"), ["-Fc", "-f", dump], source, socket);
        asPostgres(["-D", data, "-m", "fast", "-w", "stop"]);
      });
      took.restore = await timed(async () => {
        await adminQuery(`CREATE DATABASE "${db}" TEMPLATE template0`);
        this.made.push(db);
        tool(this.bin("pg_restore"), ["--no-owner", "--no-acl", "--single-transaction", "--exit-on-error", `--dbname=${db}`, dump], db);
        await fs.rm(dir, { recursive: true, force: true });
      });
    } finally {
      if (existsSync(path.join(data, "postmaster.pid"))) asPostgres(["-D", data, "-m", "immediate", "-w", "stop"]);
      await fs.rm(dir, { recursive: true, force: true });
    }
    return took;
  }

  lastUrl(): string {
    const url = new URL(TENANT_ADMIN_URL);
    url.pathname = `/${this.made[this.made.length - 1]}`;
    return url.toString();
  }

  async cleanup(): Promise<void> {
    for (const db of this.made.splice(0)) await adminQuery(`DROP DATABASE IF EXISTS "${db}" WITH (FORCE)`);
  }
}

function recoveryConf(dir: string, target: Date): string {
  return [
    "listen_addresses = ''",
    "port = 5432",
    `unix_socket_directories = '${dir}'`,
    `hba_file = '${path.join(dir, "pg_hba.conf")}'`,
    "archive_mode = off",
    "hot_standby = off",
    "max_connections = 10",
    "shared_buffers = 32MB",
    `restore_command = 'cp ${WAL_DIR}/%f %p'`,
    `recovery_target_time = '${target.toISOString().replace("T", " ").replace("Z", "+00")}'`,
    "recovery_target_action = 'promote'",
    "",
  ].join("\n");
}

/** Whether the scratch instance accepts connections (promoted); throws with its log when it stopped. */
async function ready(dir: string, data: string): Promise<boolean> {
  if (spawnSync("pg_isready", ["-q", "-h", dir, "-p", "5432"]).status === 0) return true;
  if (existsSync(path.join(data, "postmaster.pid"))) return false;
  const log = await fs.readFile(path.join(dir, "server.log"), "utf8").catch(() => "");
  throw new Error(`the recovery stopped: ${log.trim().split("\n").slice(-3).join(" | ")}`);
}

/** A program run to its end (as root: cp, chown, runuser). */
function command(bin: string, args: string[]): void {
  const run = spawnSync(bin, args, { encoding: "utf8", env: { PATH: process.env.PATH ?? "/usr/bin:/bin", LANG: "C" } });
  if (run.status !== 0) throw new Error(`${bin} ${args.join(" ")}: ${run.stderr || run.error}`);
}

/** A commit after the target and a WAL switch, then the archiver's copy of that file (as the platform does). */
async function archiveNow(): Promise<void> {
  await adminQuery("SELECT txid_current()");
  const file = await adminQuery("SELECT pg_walfile_name(pg_switch_wal())");
  await waitFor(() => existsSync(path.join(WAL_DIR, file)), { timeoutMs: 60_000, intervalMs: 100, message: `WAL ${file} archived` });
}

/** The restored data: the fill's rows and the row written just before the target. */
async function check(url: string, rows: number): Promise<void> {
  const got = await withClient(url, async (c) => [
    Number((await c.query("SELECT count(*) AS n FROM fill")).rows[0].n),
    (await c.query("SELECT note FROM marker")).rows[0]?.note,
  ]);
  if (got[0] !== rows || got[1] !== "kept") throw new Error(`restored data differs: ${JSON.stringify(got)}, expected ${rows} rows and "kept"`);
}

export async function benchPitr(): Promise<void> {
  const root = await fs.mkdtemp(path.join(os.tmpdir(), "bench-pitr-"));
  await fs.chmod(root, 0o711); // the scratch instances run as postgres
  const pitrDir = path.join(root, "platform");
  await fs.mkdir(path.join(pitrDir, "base"), { recursive: true, mode: 0o700 });
  const major = Math.floor(Number(await adminQuery("SELECT current_setting('server_version_num')")) / 10000);
  const hand = new ByHand(root, path.join(pitrDir, "base", `bench_${randomBytes(4).toString("hex")}`), major);
  const basebackupMs = await timed(() => hand.baseBackup());
  const clusterMb = Number(await adminQuery("SELECT sum(pg_database_size(datname)) FROM pg_database")) / 1048576;
  const platform = await startBenchPlatform(
    { DBAAS_CONNECTIONS_PER_ACCOUNT: "20" },
    { DBAAS_PITR_WAL_DIR: WAL_DIR, DBAAS_PITR_DIR: pitrDir, DBAAS_MAX_STORAGE_MB: "4096", GATEWAY_REQUEST_TIMEOUT_MS: "600000", GATEWAY_TIMEOUT_MS: "600000" },
  );
  const api: Api = platform;
  const restoredIds: string[] = [];
  try {
    const source: Created = await call(api, "POST", "/api/databases", { maxStorageMb: 4096 });
    const actualMb = await fill(source, SIZE_MB);
    const rows = await withClient(source.connectionString, async (c) => {
      await c.query("CREATE TABLE marker AS SELECT 'kept'::text AS note");
      return Number((await c.query("SELECT count(*) AS n FROM fill")).rows[0].n);
    });
    const target = new Date(Math.ceil((Date.now() + 1) / 1000) * 1000);
    await waitFor(() => Date.now() > target.getTime() + 20, { message: "the next second" });
    const walMb = Number(await adminQuery(`SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '${await backupStartLsn(hand.backupDir)}')`)) / 1048576;
    await withClient(source.connectionString, (c) => c.query("DROP TABLE fill; DROP TABLE marker"));
    const timestamp = target.toISOString();

    const platformMs: number[] = [];
    const phases: PlatformPhases[] = [];
    const bare: Array<Record<Phase, number>> = [];
    const byPlatform = async () => {
      let db: Created | undefined;
      const post = async () => (db = await call(api, "POST", "/api/databases", { restoreFrom: { databaseId: source.id, timestamp }, maxStorageMb: 4096 }));
      platformMs.push(await timed(async () => phases.push(await watchRestore(pitrDir, post))));
      if (!db) throw new Error("no database");
      restoredIds.push(db.id);
      await check(db.connectionString, rows);
    };
    const byHand = async () => {
      bare.push(await hand.restore(source.databaseName, target));
      await check(hand.lastUrl(), rows);
      await hand.cleanup();
    };
    for (let i = 0; i < REPS; i++) for (const side of i % 2 ? [byPlatform, byHand] : [byHand, byPlatform]) await side();
    for (const id of restoredIds.splice(0)) await call(api, "DELETE", `/api/databases/${id}`);
    await call(api, "DELETE", `/api/databases/${source.id}`);

    const bareTotal = bare.map((p) => PHASES.reduce((sum, k) => sum + p[k], 0));
    const backupMb = Number((await duBytes(hand.backupDir)) / 1048576);
    console.log(`\nbench:databases — point-in-time restore (median of ${REPS}; same base backup and target, alternating)`);
    console.log(
      `source ${actualMb.toFixed(0)} MB; tenant cluster ${clusterMb.toFixed(0)} MB at the backup; base backup ${backupMb.toFixed(0)} MB, WAL from its start to the target ${walMb.toFixed(0)} MB`,
    );
    console.log(`pg_basebackup by hand (taken once, before the fill; the platform takes it on a schedule): ${basebackupMs.toFixed(0)} ms\n`);
    console.log(`${"".padEnd(44)}${"platform".padStart(10)}${"by hand".padStart(10)}${"ratio".padStart(9)}`);
    const ratio = median(platformMs) / median(bareTotal);
    console.log(`${"time to a ready restored database".padEnd(44)}${ms(median(platformMs))}${ms(median(bareTotal))}${ratio.toFixed(2).padStart(8)}×`);
    console.log(`  samples: platform ${platformMs.map((x) => x.toFixed(0)).join(", ")} ms; by hand ${bareTotal.map((x) => x.toFixed(0)).join(", ")} ms`);
    console.log(`platform / by hand ${ratio.toFixed(2)}× (goal ≤ 1.2×: ${ratio <= 1.2 ? "met" : "missed"})`);
    console.log(`\nwhere the time goes (median ms; the platform's seen from outside, bench/databases-pitr-watch.ts):`);
    const m = (xs: number[]) => ms(median(xs));
    const rowsOf: Array<[string, number[], number[]]> = [
      ["provisioning / WAL switch and archive", phases.map((p) => p.before), bare.map((p) => p.archive)],
      ["copy of the base backup + recovery", phases.map((p) => p.copyRecovery), bare.map((p) => p.copy + p.recovery)],
      ["  of which the copy (by hand)", [], bare.map((p) => p.copy)],
      ["pg_dump (by hand: + pg_ctl stop)", phases.map((p) => p.dump), bare.map((p) => p.dump)],
      ["pg_restore (platform: + stop, rm)", phases.map((p) => p.restore), bare.map((p) => p.restore)],
      ["after the scratch is gone, to the answer", phases.map((p) => p.answer), []],
    ];
    for (const [label, p, b] of rowsOf) console.log(`  ${label.padEnd(42)}${p.length ? m(p) : "".padStart(10)}${b.length ? m(b) : "".padStart(10)}`);
  } finally {
    for (const id of restoredIds) await call(api, "DELETE", `/api/databases/${id}`).catch(() => undefined);
    await hand.cleanup().catch(() => undefined);
    await platform.stop();
    await fs.rm(root, { recursive: true, force: true });
  }
}

async function backupStartLsn(dir: string): Promise<string> {
  const label = await fs.readFile(path.join(dir, "backup_label"), "utf8");
  const lsn = /START WAL LOCATION: (\S+)/.exec(label)?.[1];
  if (!lsn) throw new Error("no START WAL LOCATION in backup_label");
  return lsn;
}

async function duBytes(dir: string): Promise<number> {
  let total = 0;
  for (const entry of await fs.readdir(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    total += entry.isDirectory() ? await duBytes(p) : (await fs.stat(p)).size;
  }
  return total;
}
