/**
 * PostgreSQL's own client tools (pg_dump, pg_restore) as child processes: credentials go in the
 * environment (PGPASSWORD), never on the command line where `ps` shows them; output beyond a
 * short tail of stderr is not kept. The version check tells dbaas whether they can be trusted with
 * the tenant server (pg_dump refuses a newer server; pg_restore of another major may mis-restore).
 */
import { spawn } from "child_process";
import { existsSync } from "fs";
import { pinnedPgOptions } from "./search-path";

export type ToolName = "pg_dump" | "pg_restore";
export const TOOLS: readonly ToolName[] = ["pg_dump", "pg_restore"];
/** Every program of the server's major version dbaas runs (point-in-time restore needs the last three). */
export type PgProgram = ToolName | "pg_basebackup" | "pg_archivecleanup" | "postgres";

/**
 * libpq's environment for a connection URL (to `database`); sslmode and sslrootcert kept when the
 * URL sets them; search_path pinned (search-path.ts) as for every other session on the server.
 */
export function libpqEnv(url: string, database: string): Record<string, string> {
  const u = new URL(url);
  const env: Record<string, string> = {
    PGHOST: decodeURIComponent(u.hostname),
    PGPORT: u.port || "5432",
    PGUSER: decodeURIComponent(u.username),
    PGPASSWORD: decodeURIComponent(u.password),
    PGDATABASE: database,
    PGCONNECT_TIMEOUT: "10",
    PGOPTIONS: pinnedPgOptions(url),
  };
  for (const [param, name] of [
    ["sslmode", "PGSSLMODE"],
    ["sslrootcert", "PGSSLROOTCERT"],
  ]) {
    const value = u.searchParams.get(param);
    if (value) env[name] = value;
  }
  return env;
}

/** Runs a tool to its end; rejects with its exit status and the tail of its stderr. `capture`: resolves with its stdout. */
export function runTool(bin: string, args: string[], env: Record<string, string>, signal?: AbortSignal, capture = false): Promise<string> {
  return new Promise((resolve, reject) => {
    // Only what the tool needs: no platform secret of this process's environment reaches it.
    const child = spawn(bin, ["--no-password", ...args], {
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin", LANG: "C", ...env },
      stdio: ["ignore", capture ? "pipe" : "ignore", "pipe"],
      signal,
    });
    let stderr = "";
    let stdout = "";
    child.stdout?.on("data", (chunk: Buffer) => (stdout += chunk.toString("utf8")));
    child.stderr?.on("data", (chunk: Buffer) => (stderr = (stderr + chunk.toString("utf8")).slice(-4000)));
    child.on("error", reject);
    child.on("close", (code, signal) => {
      if (code === 0) resolve(stdout);
      else reject(new Error(`${bin} failed (${signal ?? `exit ${code}`}): ${stderr.trim() || "no message"}`));
    });
  });
}

/** The major version a tool reports (`pg_dump (PostgreSQL) 15.20 …` → 15), or undefined when it cannot run. */
export function toolMajor(bin: string): Promise<number | undefined> {
  return new Promise((resolve) => {
    const child = spawn(bin, ["--version"], { stdio: ["ignore", "pipe", "ignore"] });
    let out = "";
    child.stdout.on("data", (chunk: Buffer) => (out += chunk.toString("utf8")));
    child.on("error", () => resolve(undefined));
    child.on("close", () => resolve(parseMajor(out)));
  });
}

export function parseMajor(versionText: string): number | undefined {
  const match = /\(PostgreSQL\)\s+(\d+)/.exec(versionText) ?? /^(\d+)/.exec(versionText.trim());
  return match ? Number(match[1]) : undefined;
}

/**
 * Pure: why snapshots cannot be taken or restored with these tools against a server of
 * `serverMajor`, or undefined when they can (the same major as the server).
 */
export function toolsMismatch(serverMajor: number, tools: Record<ToolName, number | undefined>): string | undefined {
  const wrong = TOOLS.filter((t) => tools[t] !== serverMajor).map((t) => `${t} ${tools[t] === undefined ? "is missing" : `is version ${tools[t]}`}`);
  if (!wrong.length) return undefined;
  return `snapshots need pg_dump and pg_restore of the tenant server's major version ${serverMajor}, but ${wrong.join(" and ")} (install postgresql-client-${serverMajor}, or set DBAAS_PG_BIN_DIR)`;
}

/**
 * Pure: a dump's table of contents (`pg_restore -l`) without the platform's own objects of the
 * source database (schema dbaas_guard and what is in it, event triggers): the new database has its
 * own, and its role could not create them.
 */
export function tenantToc(toc: string): string {
  const platforms = /^\d+; \d+ \d+ (EVENT TRIGGER |SCHEMA - dbaas_guard |[A-Z][A-Z ]* dbaas_guard )/;
  return toc
    .split("\n")
    .filter((line) => !platforms.test(line))
    .join("\n");
}

/** Debian keeps each major's tools apart (/usr/lib/postgresql/<major>/bin); PATH's pg_dump may be another's. */
export function debianBinDir(serverMajor: number): string {
  const dir = `/usr/lib/postgresql/${serverMajor}/bin`;
  return existsSync(`${dir}/pg_dump`) ? dir : "";
}
