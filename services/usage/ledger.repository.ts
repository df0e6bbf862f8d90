/**
 * The usage ledger in PostgreSQL (schema `usage`). `record` stores each source key once and adds
 * the new records to the hourly rollups in the same statement, so a redelivered batch, or one that
 * a replica wrote before dying unacknowledged, changes nothing. `totals` sums a window: whole hours
 * from the rollups, the partial hours at its edges from the records (cut exactly at the window),
 * reading only records that end within the account's longest record after an edge (usage.spans).
 */
import type { Pool, PoolClient } from "pg";
import { transaction } from "../../lib/db";
import type { UsageRecord, UsageResource } from "../../lib/usage-protocol";

/** What an account used of one resource under one name (GPU type, model, engine) in a window. */
export type UsageTotal = { clientId: string; resource: UsageResource; name: string; amount: number; events: number; billed?: number };

/** A record's amount: GPU-seconds (cards × seconds), MB-hours, or tokens. */
export function recordAmount(r: UsageRecord): number {
  const seconds = (Date.parse(r.end) - Date.parse(r.start)) / 1000;
  if (r.resource === "gpu") return r.quantity * seconds;
  if (r.resource === "storage") return (r.quantity * seconds) / 3600;
  return r.quantity;
}

// The hour holding a record's last instant: where its one event counts (an interval ending on an hour edge belongs to the hour before).
const LAST_HOUR = `date_trunc('hour', CASE WHEN i.ended_at > i.started_at THEN i.ended_at - interval '1 microsecond' ELSE i.ended_at END)`;
// The part of record r's amount inside [a, z): all of an instant, the overlapping share of an interval.
const SHARE = (r: string, a: string, z: string) =>
  `CASE WHEN ${r}.ended_at = ${r}.started_at THEN ${r}.amount ELSE ${r}.amount * extract(epoch FROM least(${r}.ended_at, ${z}) - greatest(${r}.started_at, ${a})) / extract(epoch FROM ${r}.ended_at - ${r}.started_at) END`;

export class LedgerRepository {
  constructor(private readonly db: Pool) {}

  /** Stores the records whose keys are new and rolls them up; returns how many were new. */
  async record(records: UsageRecord[]): Promise<number> {
    if (!records.length) return 0;
    const col = <T>(f: (r: UsageRecord) => T) => records.map(f);
    const { rows } = await this.db.query<{ n: number }>(
      `WITH input AS (
         SELECT DISTINCT ON (key) * FROM unnest($1::text[], $2::uuid[], $3::text[], $4::text[], $5::timestamptz[], $6::timestamptz[], $7::float8[], $8::float8[])
           AS t(key, client_id, resource, name, started_at, ended_at, amount, credit_factor) ORDER BY key),
       ins AS (
         INSERT INTO usage.records (key, client_id, resource, name, started_at, ended_at, amount, credit_factor) SELECT * FROM input
         ON CONFLICT (key) DO NOTHING RETURNING client_id, resource, name, started_at, ended_at, amount, credit_factor),
       parts AS (
         SELECT i.client_id, h.hour, i.resource, i.name, ${SHARE("i", "h.hour", "h.hour + interval '1 hour'")} AS amount,
           ${SHARE("i", "h.hour", "h.hour + interval '1 hour'")} * i.credit_factor AS billed,
           (h.hour = ${LAST_HOUR})::int AS events
         FROM ins i, generate_series(date_trunc('hour', i.started_at), ${LAST_HOUR}, interval '1 hour') AS h(hour)),
       rolled AS (
         INSERT INTO usage.hourly AS u (client_id, hour, resource, name, amount, billed, events)
         SELECT client_id, hour, resource, name, sum(amount), sum(billed), sum(events) FROM parts GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
         ON CONFLICT (client_id, hour, resource, name) DO UPDATE
           SET amount = u.amount + EXCLUDED.amount, billed = u.billed + EXCLUDED.billed, events = u.events + EXCLUDED.events),
       totalled AS (
         INSERT INTO usage.totals AS t (resource, name, amount, events)
         SELECT resource, name, sum(amount), count(*) FROM ins GROUP BY 1, 2 ORDER BY 1, 2
         ON CONFLICT (resource, name) DO UPDATE SET amount = t.amount + EXCLUDED.amount, events = t.events + EXCLUDED.events),
       spanned AS (
         INSERT INTO usage.spans AS s (client_id, resource, longest)
         SELECT client_id, resource, max(ended_at - started_at) FROM ins GROUP BY 1, 2 ORDER BY 1, 2
         ON CONFLICT (client_id, resource) DO UPDATE SET longest = EXCLUDED.longest WHERE EXCLUDED.longest > s.longest)
       SELECT count(*)::int AS n FROM ins`,
      [
        col((r) => r.key),
        col((r) => r.clientId),
        col((r) => r.resource),
        col((r) => r.name),
        col((r) => r.start),
        col((r) => r.end),
        col(recordAmount),
        col((r) => r.creditFactor ?? 1),
      ],
    );
    return rows[0].n;
  }

  /** Which of these source keys the ledger has. */
  private async recordedOn(db: Pool | PoolClient, keys: readonly string[]): Promise<Set<string>> {
    if (!keys.length) return new Set();
    const { rows } = await db.query<{ key: string }>("SELECT key FROM usage.records WHERE key = ANY($1::text[])", [keys]);
    return new Set(rows.map((r) => r.key));
  }

  /** The platform's all-time totals per resource and name (every account; for Prometheus, never per account). */
  async platformTotals(): Promise<UsageTotal[]> {
    const { rows } = await this.db.query<{ resource: UsageResource; name: string; amount: number; events: string }>(
      "SELECT resource, name, amount, events FROM usage.totals",
    );
    return rows.map((r) => ({ clientId: "", resource: r.resource, name: r.name, amount: Number(r.amount), events: Number(r.events) }));
  }

  /**
   * What each account used in [from, to), per resource and name. An interval record counts its
   * share inside the window; an event (a record) counts in the window holding its last instant.
   */
  async totals(clientIds: readonly string[], from: Date, to: Date): Promise<UsageTotal[]> {
    return this.totalsOn(this.db, clientIds, from, to);
  }

  /**
   * `totals` and `recorded` read in one snapshot (one REPEATABLE READ transaction when there are keys
   * to look up): a key the ledger stores between the two reads would otherwise be missing from both,
   * neither summed nor counted as still pending, and an account at its quota would look under it.
   */
  async totalsAndRecorded(
    clientIds: readonly string[],
    from: Date,
    to: Date,
    keys: readonly string[],
  ): Promise<{ totals: UsageTotal[]; recorded: Set<string> }> {
    if (!keys.length) return { totals: await this.totals(clientIds, from, to), recorded: new Set() };
    return transaction(this.db, async (client) => {
      await client.query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY");
      const totals = await this.totalsOn(client, clientIds, from, to);
      return { totals, recorded: await this.recordedOn(client, keys) };
    });
  }

  private async totalsOn(db: Pool | PoolClient, clientIds: readonly string[], from: Date, to: Date): Promise<UsageTotal[]> {
    if (!clientIds.length || to <= from) return [];
    const { rows } = await db.query<{ client_id: string; resource: UsageResource; name: string; amount: number; billed: number; events: string }>(
      `WITH b AS (
         SELECT $2::timestamptz AS f, $3::timestamptz AS t,
           CASE WHEN date_trunc('hour', $2::timestamptz) = $2::timestamptz THEN $2::timestamptz ELSE date_trunc('hour', $2::timestamptz) + interval '1 hour' END AS hs,
           date_trunc('hour', $3::timestamptz) AS he),
       whole AS (
         SELECT u.client_id, u.resource, u.name, u.amount, u.billed, u.events FROM usage.hourly u, b
         WHERE u.client_id = ANY($1::uuid[]) AND u.hour >= b.hs AND u.hour < b.he),
       frags AS (
         SELECT f AS a, hs AS z FROM b WHERE hs < he AND f < hs
         UNION ALL SELECT he, t FROM b WHERE hs < he AND he < t
         UNION ALL SELECT f, t FROM b WHERE hs >= he),
       edges AS (
         SELECT r.client_id, r.resource, r.name, ${SHARE("r", "fr.a", "fr.z")} AS amount, ${SHARE("r", "fr.a", "fr.z")} * r.credit_factor AS billed,
           (CASE WHEN r.ended_at = r.started_at THEN r.ended_at < fr.z ELSE r.ended_at > fr.a AND r.ended_at <= fr.z END)::int AS events
         FROM frags fr CROSS JOIN usage.spans s
         -- One index range per (edge, account, resource); OFFSET 0 keeps the planner from turning it into a scan of every record.
         CROSS JOIN LATERAL (SELECT * FROM usage.records x WHERE x.client_id = s.client_id AND x.resource = s.resource
           AND x.ended_at >= fr.a AND x.ended_at <= fr.z + s.longest OFFSET 0) r
         WHERE s.client_id = ANY($1::uuid[]) AND r.started_at < fr.z AND (r.ended_at > fr.a OR r.ended_at = r.started_at))
       SELECT client_id, resource, name, sum(amount)::float8 AS amount, sum(billed)::float8 AS billed, sum(events)::bigint AS events
       FROM (SELECT * FROM whole UNION ALL SELECT * FROM edges) x GROUP BY 1, 2, 3`,
      [clientIds, from, to],
    );
    return rows.map((r) => ({
      clientId: r.client_id,
      resource: r.resource,
      name: r.name,
      amount: Number(r.amount),
      billed: Number(r.billed),
      events: Number(r.events),
    }));
  }
}
