/**
 * inference.batch_lines: one row per request of a batch. A replica claims due lines (pending, or
 * running past their lease: their replica died) with FOR UPDATE SKIP LOCKED, counting the claim
 * in `attempts`; only the claim holder may finish a line (compare-and-set on status and
 * attempts). So a result is stored once, whichever replica ran the line and whenever a replica
 * stops. The batch's counts are the lines' (batches.repository.ts refreshCounts, and exact at its end):
 * a finish touches its line only, never the batch row every line in flight would queue on.
 */
import type { Pool, PoolClient } from "pg";
import type { InputLine } from "./batch-input";

export type ClaimedLine = {
  batch_id: string;
  line: number;
  client_id: string;
  custom_id: string;
  body: Record<string, unknown>;
  attempts: number;
  /** Its batch's endpoint (every line's url). */
  endpoint: string;
  /** Its batch's model allow-list (the creating token's; null: any). */
  allowed_models: string[] | null;
  /** Its batch's creating token (null: none), charged for the line up to its maxCredits. */
  token_id: string | null;
};
/** A line's stored outcome: the line of the output file (succeeded) or of the error file (failed). */
export type LineOutcome = { ok: boolean; result: Record<string, unknown> };

const INSERT_CHUNK = 5_000;

export class LinesRepository {
  constructor(private readonly db: Pool) {}

  async insert(client: PoolClient, batchId: string, clientId: string, lines: InputLine[]): Promise<void> {
    for (let i = 0; i < lines.length; i += INSERT_CHUNK) {
      const part = lines.slice(i, i + INSERT_CHUNK);
      await client.query(
        `INSERT INTO inference.batch_lines (batch_id, line, client_id, custom_id, body, status)
         SELECT $1, t.line, $2, t.custom_id, t.body, 'pending' FROM unnest($3::int[], $4::text[], $5::jsonb[]) AS t(line, custom_id, body)`,
        [batchId, clientId, part.map((l) => l.line), part.map((l) => l.customId), part.map((l) => JSON.stringify(l.body))],
      );
    }
  }

  /**
   * Up to `limit` due lines of in-progress batches, each leased for `leaseMs`, at most `perAccount`
   * in flight per account counting `inFlight` (this replica's), accounts taken round-robin.
   */
  async claim(limit: number, perAccount: number, inFlight: ReadonlyMap<string, number>, leaseMs: number): Promise<ClaimedLine[]> {
    const { rows } = await this.db.query<ClaimedLine>(
      `WITH busy AS (SELECT * FROM unnest($3::uuid[], $4::int[]) AS b(client_id, in_flight)),
       -- The accounts with a batch running (few rows, the batches_open index), not a scan of every due line.
       accounts AS (SELECT DISTINCT client_id FROM inference.batches WHERE status = 'in_progress'),
       due AS (SELECT d.batch_id, d.line, coalesce(b.in_flight, 0) + d.rank AS slot
               FROM accounts a LEFT JOIN busy b ON b.client_id = a.client_id,
               LATERAL (SELECT l.batch_id, l.line, row_number() OVER (ORDER BY l.next_at, l.batch_id, l.line) AS rank
                        FROM inference.batch_lines l
                        WHERE l.client_id = a.client_id AND l.status IN ('pending', 'running') AND l.next_at <= now()
                          -- The running batches' ids once per claim (an InitPlan), not a lookup of the batch row per due line:
                          -- that row takes a new version at every finished line, and a join read ~40 buffers per due line.
                          AND l.batch_id = ANY (ARRAY(SELECT id FROM inference.batches WHERE status = 'in_progress'))
                        ORDER BY l.next_at, l.batch_id, l.line LIMIT $5) d
               WHERE coalesce(b.in_flight, 0) < $5),
       picked AS (SELECT batch_id, line FROM due WHERE slot <= $5 ORDER BY slot LIMIT $1)
       UPDATE inference.batch_lines l SET status = 'running', attempts = l.attempts + 1, next_at = now() + make_interval(secs => $2::float8 / 1000)
       WHERE (l.batch_id, l.line) IN (SELECT batch_id, line FROM inference.batch_lines
                                      WHERE (batch_id, line) IN (SELECT batch_id, line FROM picked)
                                        AND status IN ('pending', 'running') AND next_at <= now()
                                      FOR UPDATE SKIP LOCKED)
       RETURNING l.batch_id, l.line, l.client_id, l.custom_id, l.body, l.attempts,
         (SELECT endpoint FROM inference.batches WHERE id = l.batch_id) AS endpoint,
         (SELECT allowed_models FROM inference.batches WHERE id = l.batch_id) AS allowed_models,
         (SELECT token_id FROM inference.batches WHERE id = l.batch_id) AS token_id`,
      [limit, leaseMs, [...inFlight.keys()], [...inFlight.values()], perAccount],
    );
    return rows;
  }

  /** Stores the claim's outcome; false: the claim was lost (expired, cancelled, taken again). */
  async finish(l: ClaimedLine, outcome: LineOutcome): Promise<boolean> {
    const { rowCount } = await this.db.query(
      `UPDATE inference.batch_lines SET status = $4, result = $5, finished_at = now()
       WHERE batch_id = $1 AND line = $2 AND status = 'running' AND attempts = $3`,
      [l.batch_id, l.line, l.attempts, outcome.ok ? "succeeded" : "failed", JSON.stringify(outcome.result)],
    );
    return (rowCount ?? 0) > 0;
  }

  /** The claim back to pending, due after `delayMs`; `counted: false` (a rate limit) gives the attempt back. */
  async retry(l: ClaimedLine, delayMs: number, counted: boolean): Promise<void> {
    await this.db.query(
      `UPDATE inference.batch_lines SET status = 'pending', next_at = now() + make_interval(secs => $4::float8 / 1000),
         attempts = attempts - CASE WHEN $5 THEN 0 ELSE 1 END
       WHERE batch_id = $1 AND line = $2 AND status = 'running' AND attempts = $3`,
      [l.batch_id, l.line, l.attempts, delayMs, counted],
    );
  }

  /** Every line left (pending or running) of the batch failed with `result(custom_id)`. */
  async failRemaining(client: PoolClient, batchId: string, result: (customId: string) => Record<string, unknown>): Promise<void> {
    const { rows } = await client.query<{ line: number; custom_id: string }>(
      "SELECT line, custom_id FROM inference.batch_lines WHERE batch_id = $1 AND status IN ('pending', 'running') FOR UPDATE",
      [batchId],
    );
    if (!rows.length) return;
    await client.query(
      `UPDATE inference.batch_lines l SET status = 'failed', result = t.result, finished_at = now()
       FROM unnest($2::int[], $3::jsonb[]) AS t(line, result) WHERE l.batch_id = $1 AND l.line = t.line`,
      [batchId, rows.map((r) => r.line), rows.map((r) => JSON.stringify(result(r.custom_id)))],
    );
  }

  /** The batch's lines, once its files hold their results (lines never run, of a cancelled batch, go with them). */
  async drop(client: PoolClient, batchId: string): Promise<void> {
    await client.query("DELETE FROM inference.batch_lines WHERE batch_id = $1", [batchId]);
  }

  /** The stored results of the lines that ended `ok` (or not), in line order: a file's lines. */
  async results(client: PoolClient, batchId: string, ok: boolean): Promise<string[]> {
    const { rows } = await client.query<{ result: string }>(
      "SELECT result::text AS result FROM inference.batch_lines WHERE batch_id = $1 AND status = $2 ORDER BY line",
      [batchId, ok ? "succeeded" : "failed"],
    );
    return rows.map((r) => r.result);
  }
}
