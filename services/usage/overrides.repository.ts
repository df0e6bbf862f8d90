/** Per-account quota overrides (usage.quota_overrides): a null column is the default. */
import type { Pool } from "pg";
import { Overridable, OVERRIDABLE, Overrides } from "./summary";

const COLUMN: Record<Overridable, string> = {
  credits: "credits",
  gpuSeconds: "gpu_seconds",
  tokens: "tokens",
  databases: "databases",
  storageMb: "storage_mb",
  runningGpus: "running_gpus",
  queuedJobs: "queued_jobs",
  requestsPerMinute: "requests_per_minute",
  tokensPerMinute: "tokens_per_minute",
  fairShareWeight: "fair_share_weight",
};
const SELECT = OVERRIDABLE.map((k) => `${COLUMN[k]} AS "${k}"`).join(", ");

export class OverridesRepository {
  constructor(private readonly db: Pool) {}

  async of(clientIds: readonly string[]): Promise<Map<string, Overrides>> {
    if (!clientIds.length) return new Map();
    const { rows } = await this.db.query<Overrides & { client_id: string }>(
      `SELECT client_id, ${SELECT} FROM usage.quota_overrides WHERE client_id = ANY($1::uuid[])`,
      [clientIds],
    );
    return new Map(rows.map(({ client_id, ...o }) => [client_id, numeric(o)]));
  }

  /** Sets the given overrides (null: back to the default), leaving the others as they are; returns the account's overrides. */
  async set(clientId: string, changes: Overrides, by: string): Promise<Overrides> {
    const keys = OVERRIDABLE.filter((k) => changes[k] !== undefined);
    const values = keys.map((k) => changes[k]);
    const { rows } = await this.db.query<Overrides>(
      `INSERT INTO usage.quota_overrides AS q (client_id, updated_by${keys.map((k) => `, ${COLUMN[k]}`).join("")})
       VALUES ($1, $2${keys.map((_, i) => `, $${i + 3}`).join("")})
       ON CONFLICT (client_id) DO UPDATE SET updated_at = now(), updated_by = EXCLUDED.updated_by${keys.map((k) => `, ${COLUMN[k]} = EXCLUDED.${COLUMN[k]}`).join("")}
       RETURNING ${SELECT}`,
      [clientId, by, ...values],
    );
    return numeric(rows[0]);
  }
}

/** bigint columns come back as strings. */
function numeric(o: Overrides): Overrides {
  return Object.fromEntries(OVERRIDABLE.map((k) => [k, o[k] === null || o[k] === undefined ? null : Number(o[k])]));
}
