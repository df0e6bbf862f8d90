/**
 * The extension allow-list at work (docs/databases.md "Extensions"): what the detail lists, and
 * the guard brought to every active database whose guard enforces another list (databases from
 * before the guard, or a changed DBAAS_EXTENSIONS), as the catalog level is.
 */
import type { LoggerInstance } from "moleculer";
import type { DatabaseRow, DatabasesRepository } from "./databases.repository";
import { AVAILABLE_EXTENSIONS_SQL, checkExtension, INSTALLED_EXTENSIONS_SQL } from "./extension-sql";
import { GuardConfig, guardPolicy, guardSql } from "./guard-sql";
import type { TenantServer } from "./tenant-server";

export type ExtensionsDetail = { available: string[]; installed: string[] };

/** How long the server's list of available extensions is kept (packages change rarely). */
const AVAILABLE_TTL_MS = 60_000;

export class Extensions {
  private available?: { names: Promise<string[]>; at: number };

  constructor(private readonly deps: { repo: DatabasesRepository; tenant: TenantServer; guard: GuardConfig; logger: LoggerInstance }) {}

  /** The allow-listed ones installed on the server and creatable by a tenant. */
  async availableNow(): Promise<string[]> {
    if (!this.available || Date.now() - this.available.at > AVAILABLE_TTL_MS) {
      const allowed = this.deps.guard.extensions.map(checkExtension);
      const names = this.deps.tenant.conn.pool.query<{ name: string }>(AVAILABLE_EXTENSIONS_SQL, [allowed]).then(({ rows }) => rows.map((r) => r.name));
      this.available = { names, at: Date.now() };
      names.catch(() => (this.available = undefined));
    }
    return this.available.names;
  }

  /** The detail's `extensions`; undefined when the server cannot be asked now (the rest of the detail still answers). */
  async detail(row: DatabaseRow): Promise<ExtensionsDetail | undefined> {
    try {
      const installed = this.deps.tenant.conn.inDatabase(row.database_name, async (client) =>
        (await client.query<{ name: string }>(INSTALLED_EXTENSIONS_SQL)).rows.map((r) => r.name),
      );
      const [available, names] = await Promise.all([this.availableNow(), installed]);
      return { available, installed: names };
    } catch (err) {
      this.deps.logger.warn(`Extensions of ${row.database_name} not read: ${(err as Error).message}`);
      return undefined;
    }
  }

  /** Every active database's guard at the configuration (one failure stops no other; retried next pass). */
  async applyPolicy(): Promise<void> {
    const { repo, tenant, guard, logger } = this.deps;
    const policy = guardPolicy(guard);
    for (const row of await repo.listExtensionPolicyNot(policy)) {
      try {
        await tenant.conn.inDatabase(row.database_name, (client) => client.query(guardSql(guard)));
        await repo.markExtensionPolicy(row.id, policy);
      } catch (err) {
        logger.warn(`Extension guard of database ${row.database_name} not applied yet: ${(err as Error).message}`);
      }
    }
  }
}
