/**
 * Gives a service its own PostgreSQL schema: `this.db` (a pg Pool on DATABASE_URL), the
 * platform database created if missing, and the service's migrations applied at start-up.
 */
import type { Service, ServiceSchema, ServiceSettingSchema } from "moleculer";
import type { Pool } from "pg";
import { platformSettingsOf } from "../lib/platform-settings";
import { acquirePool, ensureDatabase, migrate, Migration, releasePool } from "../lib/db";
import { addReadinessCheck } from "../lib/health";

export interface DbThis {
  db: Pool;
  dbUrl: string;
}

export function DbMixin(opts: { schema: string; migrations: Migration[]; poolSize?: number }): Partial<ServiceSchema> {
  const mixin: Partial<ServiceSchema<ServiceSettingSchema, Service & DbThis>> = {
    created(this: Service & DbThis) {
      this.dbUrl = platformSettingsOf(this.broker).databaseUrl;
      this.db = acquirePool(this.dbUrl, opts.poolSize ?? 10);
      // The process is not ready while its PostgreSQL does not answer (lib/health.ts).
      addReadinessCheck(this, "postgres", () => this.db.query("SELECT 1"));
    },
    async started(this: Service & DbThis) {
      await ensureDatabase(this.dbUrl);
      const applied = await migrate(this.db, opts.schema, opts.migrations);
      if (applied.length) this.logger.info(`Schema ${opts.schema}: applied migrations ${applied.join(", ")}`);
    },
    async stopped(this: Service & DbThis) {
      await releasePool(this.dbUrl);
    },
  };
  // moleculer types `mixins` with the plain Service as `this`; the handlers above need DbThis.
  return mixin as Partial<ServiceSchema>;
}
