/**
 * The audit trail of operators' actions: every admin action, refused or not once it reached its
 * handler, leaves one log line and one row naming the administrator, the action and its target.
 * Written from the admin service's hooks, so no handler has to remember it.
 */
import type { Pool } from "pg";

export type AuditEntry = {
  /** The administrator's client id (from the verified caller). */
  adminId: string;
  /** The action, e.g. `admin.drainNode`. */
  action: string;
  /** What it was aimed at: the action's params (node id, job id, filters). */
  target: Record<string, unknown>;
  /** `ok`, or the error code it answered with. */
  outcome: string;
};

/** The entry of one admin action from its context's facts (pure). */
export function auditEntry(action: string, clientId: string | undefined, params: unknown, err?: unknown): AuditEntry {
  const target = params && typeof params === "object" ? { ...(params as Record<string, unknown>) } : {};
  const code = err === undefined ? "ok" : String((err as { type?: unknown }).type ?? (err as { name?: unknown }).name ?? "ERROR");
  return { adminId: clientId ?? "unknown", action, target, outcome: code };
}

/** The line an audit entry logs: who, what, on what, how it ended. */
export function auditLine(entry: AuditEntry): string {
  return `admin audit: ${entry.adminId} ${entry.action} ${JSON.stringify(entry.target)} -> ${entry.outcome}`;
}

export class AuditRepository {
  constructor(private readonly db: Pool) {}

  async record(entry: AuditEntry): Promise<void> {
    await this.db.query(`INSERT INTO admin.audit_log (admin_id, action, target, outcome) VALUES ($1, $2, $3, $4)`, [
      entry.adminId,
      entry.action,
      JSON.stringify(entry.target),
      entry.outcome,
    ]);
  }
}
