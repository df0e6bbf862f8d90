/**
 * Point-in-time restore's files (docs/databases.md "Point-in-time restore"): base backups of the
 * whole tenant cluster in DBAAS_PITR_DIR/base (pg_basebackup, plain format with the WAL it needs),
 * each with `dbaas-backup.json` saying when it started and ended, and the server's WAL archive
 * (DBAAS_PITR_WAL_DIR, written by its archive_command). A backup is taken under a temporary name
 * and renamed when complete; pruning keeps what the retention window needs and removes older WAL
 * with pg_archivecleanup. Names are generated here only: nothing a client sends becomes a path.
 */
import { execFile } from "child_process";
import { randomUUID } from "crypto";
import { promisify } from "util";
import { existsSync, promises as fs } from "fs";
import path from "path";
import { libpqEnv, PgProgram, runTool } from "./pg-tools";

export type BaseBackup = { id: string; dir: string; startedAt: Date; endedAt: Date };

const execFileAsync = promisify(execFile);
const META = "dbaas-backup.json";
const PARTIAL = ".partial";

export class PitrStore {
  readonly baseDir: string;

  constructor(
    readonly root: string,
    readonly walDir: string,
    private readonly bin: (tool: PgProgram) => string,
  ) {
    this.baseDir = path.join(root, "base");
  }

  async init(): Promise<void> {
    await fs.mkdir(this.baseDir, { recursive: true, mode: 0o700 });
    // A root dbaas runs scratch instances as postgres (pitr-scratch.ts), which must reach its folder inside.
    if (process.getuid?.() === 0) await fs.chmod(this.root, 0o711);
  }

  /** Complete base backups, oldest first. */
  async list(): Promise<BaseBackup[]> {
    const backups: BaseBackup[] = [];
    for (const name of await fs.readdir(this.baseDir)) {
      if (name.endsWith(PARTIAL)) continue;
      const dir = path.join(this.baseDir, name);
      try {
        const meta = JSON.parse(await fs.readFile(path.join(dir, META), "utf8")) as { startedAt: string; endedAt: string };
        backups.push({ id: name, dir, startedAt: new Date(meta.startedAt), endedAt: new Date(meta.endedAt) });
      } catch {
        // not one of ours, or incomplete: ignored (and never removed)
      }
    }
    return backups.sort((a, b) => a.endedAt.getTime() - b.endedAt.getTime());
  }

  /** A base backup of the cluster now, as the admin (a superuser may replicate). */
  async take(adminUrl: string, signal?: AbortSignal): Promise<BaseBackup> {
    const id = `${new Date().toISOString().replace(/[:.]/g, "-")}_${randomUUID().slice(0, 8)}`;
    const partial = path.join(this.baseDir, `${id}${PARTIAL}`);
    const startedAt = new Date();
    try {
      await runTool(this.bin("pg_basebackup"), ["-D", partial, "-Fp", "-X", "stream", "-c", "fast"], libpqEnv(adminUrl, "postgres"), signal);
      const endedAt = new Date();
      await fs.writeFile(path.join(partial, META), JSON.stringify({ startedAt, endedAt }));
      const dir = path.join(this.baseDir, id);
      await fs.rename(partial, dir);
      return { id, dir, startedAt, endedAt };
    } catch (err) {
      await fs.rm(partial, { recursive: true, force: true });
      throw err;
    }
  }

  /**
   * Keeps every backup that ended within the window and the newest one before it (the window's
   * start needs it), removes the rest, then the archived WAL older than the oldest backup kept.
   */
  async prune(windowStart: Date): Promise<number> {
    const backups = await this.list();
    const older = backups.filter((b) => b.endedAt < windowStart);
    const drop = older.slice(0, -1);
    for (const b of drop) await fs.rm(b.dir, { recursive: true, force: true });
    const oldest = backups.find((b) => !drop.includes(b));
    const firstWal = oldest ? await startWalOf(oldest) : undefined;
    if (firstWal && existsSync(this.walDir)) await execFileAsync(this.bin("pg_archivecleanup"), [this.walDir, firstWal]);
    return drop.length;
  }

  /**
   * What a dbaas that died while taking a base backup left. The folder is shared by the replicas:
   * the caller makes sure none is taking one now (pitr.ts, removeLeftovers).
   */
  async removePartialBackups(): Promise<void> {
    for (const name of await fs.readdir(this.baseDir)) if (name.endsWith(PARTIAL)) await fs.rm(path.join(this.baseDir, name), { recursive: true, force: true });
  }

  /**
   * What a dbaas that died during a restore left: its scratch instances (whose postgres outlives
   * its parent: stopped first, if its pid still runs that folder's postgres). The caller makes sure
   * no replica restores now (pitr.ts, removeLeftovers).
   */
  async removeScratchLeftovers(): Promise<void> {
    for (const name of await fs.readdir(this.root)) {
      if (!name.startsWith("scratch-")) continue;
      const data = path.join(this.root, name, "data");
      const pid = Number((await fs.readFile(path.join(data, "postmaster.pid"), "utf8").catch(() => "")).split("\n")[0]);
      const cmdline = pid > 0 ? await fs.readFile(`/proc/${pid}/cmdline`, "utf8").catch(() => "") : "";
      if (cmdline.includes(data)) process.kill(pid, "SIGQUIT"); // immediate shutdown: nothing of it is kept
      await fs.rm(path.join(this.root, name), { recursive: true, force: true });
    }
  }
}

/** The WAL file the backup starts in (its backup_label). */
async function startWalOf(backup: BaseBackup): Promise<string | undefined> {
  const label = await fs.readFile(path.join(backup.dir, "backup_label"), "utf8").catch(() => "");
  return /START WAL LOCATION: \S+ \(file ([0-9A-F]{24})\)/.exec(label)?.[1];
}
