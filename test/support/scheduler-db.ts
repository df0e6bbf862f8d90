/** A test database with the gpu_scheduler schema migrated, for repository tests against the real PostgreSQL. */
import type { Pool } from "pg";
import { ensureDatabase, migrate, newPool } from "../../lib/db";
import { migrations } from "../../services/gpu-scheduler/migrations";

/** A pool of `max` connections to `url`'s database, created if missing, with the scheduler's migrations applied. */
export async function schedulerDatabase(url: string, max: number): Promise<Pool> {
  await ensureDatabase(url);
  const pool = newPool({ connectionString: url, max });
  await migrate(pool, "gpu_scheduler", migrations);
  return pool;
}
