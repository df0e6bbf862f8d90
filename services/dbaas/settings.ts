/** dbaas's settings (README "Configuration" and "Databases"), parsed when it is created. */
import { Env, flag, int, intAtLeast, list, optionalInt, positive, SettingError, text } from "../../lib/settings";
import { DEFAULT_EXTENSIONS, EXTENSION_NAME } from "./extension-sql";

/**
 * dbaas catalog levels (tenant-sql.ts hiddenAt): `sessions` hides other tenants' sessions and
 * activity, `all` also the names of databases and roles (pg_dump and psql's \l then fail), `off`
 * nothing.
 */
export const CATALOG_LEVELS = ["off", "sessions", "all"] as const;
export type CatalogLevel = (typeof CATALOG_LEVELS)[number];

/** DBAAS_HIDE_CATALOG: a level, `true` (the former default: `all`) or `false` (`off`); unset or empty: `sessions`. */
export function parseCatalogLevel(raw: string | undefined): CatalogLevel {
  const value = (raw ?? "").trim().toLowerCase();
  if (value === "") return "sessions";
  if (value === "true") return "all";
  if (value === "false") return "off";
  if ((CATALOG_LEVELS as readonly string[]).includes(value)) return value as CatalogLevel;
  throw new Error(`DBAAS_HIDE_CATALOG must be "sessions" (the default), "all" (or "true") or "off" (or "false"), got "${raw}"`);
}

/** libpq's sslmode values a connection string may carry. */
export const SSL_MODES = ["disable", "allow", "prefer", "require", "verify-ca", "verify-full"] as const;

/**
 * DBAAS_SSLMODE: `auto` (unset: `require` when the tenant server has TLS on, nothing otherwise),
 * `off` (never), or an sslmode written into every connection string.
 */
export function parseSslMode(raw: string | undefined): "auto" | "off" | (typeof SSL_MODES)[number] {
  const value = (raw ?? "").trim().toLowerCase();
  if (value === "" || value === "auto") return "auto";
  if (value === "off" || (SSL_MODES as readonly string[]).includes(value)) return value as "off" | (typeof SSL_MODES)[number];
  throw new Error(`DBAAS_SSLMODE must be "auto" (the default), "off" or one of ${SSL_MODES.join(", ")}, got "${raw}"`);
}

export type DbaasSettings = {
  /** Superuser URL of the server hosting client databases; no default: never the state server by accident. */
  adminUrl?: string;
  /** Explicit opt-in to host client databases on the platform's own state server (passwords still checked). */
  allowStateServer: boolean;
  /** Tenant connections of one account, shared out over its databases' roles. */
  connectionsPerAccount: number;
  /** Tenant-server connections kept free for the platform, beyond superuser_reserved_connections. */
  reservedConnections: number;
  /** Most connections of one client database's role (the account's share may be lower). */
  connectionLimit: number;
  /** What of the catalog tenants cannot read. */
  hideCatalog: CatalogLevel;
  /** Host and port written into connection strings (what clients reach the server by). */
  publicHost: string;
  publicPort: number;
  /** The sslmode connection strings carry (parseSslMode). */
  sslMode: ReturnType<typeof parseSslMode>;
  maxPerAccount: number;
  /** Storage quota of a new database, and the most a client may ask for one (maxStorageMb at create). */
  maxStorageMb: number;
  /** The account's storage quota (QUOTA_STORAGE_MB: its databases' maxima plus its snapshots); undefined: none. */
  accountStorageMb?: number;
  quotaCheckS: number;
  /** The quota tick (seconds): all databases' activity read at once, and those near their quota or busy measured (quota-activity.ts). */
  quotaNearCheckS: number;
  reconcileS: number;
  /** CREATE DATABASE statements running at once on the tenant server (across replicas). */
  createConcurrency: number;
  /** How often storage is reported to the usage ledger (seconds; each hour counts its first report). */
  usageSampleS: number;
  /** Where snapshot dumps are kept (snapshot-store.ts), shared by every replica. */
  snapshotDir: string;
  /** Snapshots an account may keep (pending or ready). */
  snapshotsPerAccount: number;
  /** pg_dump / pg_restore processes at once per tenant server (across replicas). */
  snapshotConcurrency: number;
  /** Directory of pg_dump and pg_restore; empty: the server's major version's Debian directory if present, else PATH. */
  pgBinDir: string;
  /** Records stuck in provisioning/destroying this long are reclaimed even while their owner lives (a hung process); a dead owner's go at once. */
  reconcileGraceS: number;
  /** Rows written within one quota tick that get a database measured at once. */
  quotaBusyRows: number;
  /** Databases active below quotaBusyRows (any row or transaction) given a size sample per tick: an index build moves few rows. */
  quotaSamples: number;
  /** Extensions a database's owner may create, where installed (and trusted: extension-sql.ts). */
  extensions: string[];
  /** The pooled endpoint (PgBouncer) written into pooledConnectionString; no port: none configured. */
  pooledHost: string;
  pooledPort?: number;
  /** The role PgBouncer's auth_query runs as (scripts/setup/tenant-pgbouncer.sh). */
  poolerRole: string;
  /** The tenant server's WAL archive (its archive_command's folder); unset: no point-in-time restore. */
  pitrWalDir?: string;
  /** Base backups and scratch instances of point-in-time restore. */
  pitrDir: string;
  pitrRetentionH: number;
  /** A base backup when the newest is this old (hours). */
  pitrBaseBackupH: number;
};

/** DBAAS_EXTENSIONS: a comma list of extension names; unset: the default list; `none`: no extension at all. */
export function parseExtensions(env: Env): string[] {
  if (env.DBAAS_EXTENSIONS === undefined || env.DBAAS_EXTENSIONS.trim() === "") return [...DEFAULT_EXTENSIONS];
  const names = list(env, "DBAAS_EXTENSIONS");
  if (names.length === 1 && names[0] === "none") return [];
  const bad = names.find((n) => !EXTENSION_NAME.test(n));
  if (bad !== undefined) throw new SettingError("DBAAS_EXTENSIONS", bad, "extension names separated by commas (or none)");
  return names;
}

export const parseDbaasSettings = (env: Env): DbaasSettings => ({
  adminUrl: text(env, "DBAAS_ADMIN_URL"),
  allowStateServer: flag(env, "DBAAS_ALLOW_STATE_SERVER"),
  connectionsPerAccount: int(env, "DBAAS_CONNECTIONS_PER_ACCOUNT", 20),
  reservedConnections: int(env, "DBAAS_RESERVED_CONNECTIONS", 20),
  connectionLimit: int(env, "DBAAS_CONNECTION_LIMIT", 20),
  hideCatalog: parseCatalogLevel(env.DBAAS_HIDE_CATALOG),
  publicHost: text(env, "DBAAS_PUBLIC_HOST", "localhost"),
  publicPort: int(env, "DBAAS_PUBLIC_PORT", 5432),
  sslMode: parseSslMode(env.DBAAS_SSLMODE),
  maxPerAccount: int(env, "DBAAS_MAX_PER_ACCOUNT", 5),
  maxStorageMb: int(env, "DBAAS_MAX_STORAGE_MB", 1024),
  accountStorageMb: optionalInt(env, "QUOTA_STORAGE_MB"),
  quotaCheckS: positive(env, "DBAAS_QUOTA_CHECK_S", 30),
  quotaNearCheckS: positive(env, "DBAAS_QUOTA_NEAR_CHECK_S", 1),
  reconcileS: positive(env, "DBAAS_RECONCILE_S", 60),
  createConcurrency: int(env, "DBAAS_CREATE_CONCURRENCY", 2),
  usageSampleS: positive(env, "DBAAS_USAGE_SAMPLE_S", 300),
  snapshotDir: text(env, "DBAAS_SNAPSHOT_DIR", "data/snapshots"),
  snapshotConcurrency: int(env, "DBAAS_SNAPSHOT_CONCURRENCY", 2),
  snapshotsPerAccount: int(env, "DBAAS_SNAPSHOTS_PER_ACCOUNT", 10),
  pgBinDir: text(env, "DBAAS_PG_BIN_DIR", ""),
  reconcileGraceS: int(env, "DBAAS_RECONCILE_GRACE_S", 300),
  quotaBusyRows: int(env, "DBAAS_QUOTA_BUSY_ROWS", 1000),
  quotaSamples: intAtLeast(env, "DBAAS_QUOTA_SAMPLES", 50, 0),
  extensions: parseExtensions(env),
  pooledHost: text(env, "DBAAS_POOLED_HOST", text(env, "DBAAS_PUBLIC_HOST", "localhost")),
  pooledPort: optionalInt(env, "DBAAS_POOLED_PORT"),
  poolerRole: text(env, "DBAAS_POOLER_ROLE", "dbaas_pooler"),
  pitrWalDir: text(env, "DBAAS_PITR_WAL_DIR"),
  pitrDir: text(env, "DBAAS_PITR_DIR", "data/pitr"),
  pitrRetentionH: positive(env, "DBAAS_PITR_RETENTION_H", 24),
  pitrBaseBackupH: positive(env, "DBAAS_PITR_BASEBACKUP_H", 6),
});
