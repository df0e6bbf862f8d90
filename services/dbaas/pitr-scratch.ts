/**
 * A throw-away PostgreSQL instance recovered from a base backup to a point in time (PostgreSQL 15
 * "Point-in-Time Recovery": recovery.signal, restore_command from the WAL archive,
 * recovery_target_time, then promote), reachable only through a Unix socket in its own 0700
 * folder, for the one pg_dump a restore needs; stopped and removed afterwards, whatever happened.
 * PostgreSQL refuses to run as root: a root dbaas (the CI machine) runs it as the owner of the WAL
 * archive (postgres), which the copy is given to.
 */
import { ChildProcess, execFile, spawn } from "child_process";
import { promises as fs, statSync } from "fs";
import path from "path";
import { Client } from "pg";
import { promisify } from "util";
import type { PgProgram } from "./pg-tools";
import type { BaseBackup } from "./pitr-store";

const execFileAsync = promisify(execFile);
/** The socket's name: .s.PGSQL.<port> in the folder; nothing listens on TCP. */
const PORT = 5432;

export type ScratchTarget = { backup: BaseBackup; walDir: string; target: Date; bin: (tool: PgProgram) => string; adminUser: string; readyTimeoutMs: number };

/** Runs `work` with a scratch instance recovered to `target`, given its socket folder. */
export async function withRecoveredScratch<T>(root: string, t: ScratchTarget, work: (socketDir: string) => Promise<T>): Promise<T> {
  const dir = await fs.mkdtemp(path.join(root, "scratch-"));
  let server: ChildProcess | undefined;
  try {
    const data = path.join(dir, "data");
    await execFileAsync("cp", ["-a", t.backup.dir, data]);
    await fs.rm(path.join(data, "dbaas-backup.json"), { force: true });
    await fs.writeFile(path.join(data, "recovery.signal"), "");
    // ALTER SYSTEM settings of the tenant server would apply here too: this instance has its own.
    await fs.writeFile(path.join(data, "postgresql.auto.conf"), "");
    await fs.writeFile(path.join(dir, "pg_hba.conf"), "local all all trust\n");
    await fs.writeFile(path.join(dir, "pg_ident.conf"), "");
    await fs.writeFile(path.join(dir, "postgresql.conf"), scratchConf(dir, t));
    const owner = process.getuid?.() === 0 ? statSync(t.walDir) : undefined;
    if (owner) await execFileAsync("chown", ["-R", `${owner.uid}:${owner.gid}`, dir]);
    await fs.chmod(dir, 0o700);
    await fs.chmod(data, 0o700);
    const log = await fs.open(path.join(dir, "server.log"), "w");
    server = spawn(t.bin("postgres"), ["-D", data, "-c", `config_file=${path.join(dir, "postgresql.conf")}`], {
      stdio: ["ignore", log.fd, log.fd],
      ...(owner ? { uid: owner.uid, gid: owner.gid } : {}),
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin", LANG: "C" },
    });
    await log.close();
    await waitPromoted(server, dir, t);
    return await work(dir);
  } finally {
    if (server) await stop(server);
    await fs.rm(dir, { recursive: true, force: true });
  }
}

function scratchConf(dir: string, t: ScratchTarget): string {
  const quoted = (v: string) => `'${v.replace(/'/g, "''")}'`;
  return [
    "listen_addresses = ''",
    `port = ${PORT}`,
    `unix_socket_directories = ${quoted(dir)}`,
    `hba_file = ${quoted(path.join(dir, "pg_hba.conf"))}`,
    `ident_file = ${quoted(path.join(dir, "pg_ident.conf"))}`,
    "archive_mode = off",
    // No connections until promoted: so its limits need not match the tenant server's (a hot standby's must).
    "hot_standby = off",
    "max_connections = 10",
    "shared_buffers = 32MB",
    "logging_collector = off",
    `restore_command = ${quoted(`cp ${t.walDir}/%f %p`)}`,
    // PostgreSQL's own timestamptz text (it takes no ISO "T…Z" here), in UTC to the microsecond.
    `recovery_target_time = ${quoted(t.target.toISOString().replace("T", " ").replace("Z", "+00"))}`,
    "recovery_target_inclusive = on",
    "recovery_target_action = 'promote'",
    "",
  ].join("\n");
}

/** Until the instance has recovered to the target and been promoted; its log's tail when it stops instead. */
async function waitPromoted(server: ChildProcess, dir: string, t: ScratchTarget): Promise<void> {
  let exited = false;
  server.once("exit", () => (exited = true));
  const deadline = Date.now() + t.readyTimeoutMs;
  while (Date.now() < deadline) {
    if (exited) {
      const log = await fs.readFile(path.join(dir, "server.log"), "utf8").catch(() => "");
      const lines = log.trim().split("\n");
      const why = lines.filter((l) => /FATAL|PANIC|ERROR/.test(l));
      throw new Error(`the recovery stopped: ${(why.length ? why : lines).slice(-3).join(" | ")}`);
    }
    const client = new Client({ host: dir, port: PORT, user: t.adminUser, database: "postgres" });
    client.on("error", () => undefined);
    try {
      await client.connect();
      const { rows } = await client.query<{ r: boolean }>("SELECT pg_catalog.pg_is_in_recovery() AS r");
      if (!rows[0].r) return;
    } catch {
      // not accepting connections yet
    } finally {
      await client.end().catch(() => undefined);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`the recovery did not finish within ${t.readyTimeoutMs} ms`);
}

/** Fast shutdown, then SIGKILL if it lingers. */
async function stop(server: ChildProcess): Promise<void> {
  if (server.exitCode !== null || server.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => server.once("exit", () => resolve()));
  server.kill("SIGINT");
  const timer = setTimeout(() => server.kill("SIGKILL"), 30_000);
  await exited;
  clearTimeout(timer);
}

export const SCRATCH_PORT = PORT;
