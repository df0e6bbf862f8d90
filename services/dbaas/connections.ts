/**
 * Tenant connections, decided per account: PostgreSQL's CONNECTION LIMIT is per role, so the
 * account's budget (DBAAS_CONNECTIONS_PER_ACCOUNT) is split over its databases' roles and split
 * again whenever it gains or loses one; the server keeps room for the platform. Pure.
 */
import type { ConnectionCapacity } from "./tenant-server";

export type ConnectionPolicy = {
  /** Connections one account may hold across all its databases. */
  perAccount: number;
  /** Most connections of one database's role, whatever its account's share. */
  perDatabase: number;
  /** Connections kept free for the platform beyond superuser_reserved_connections. */
  reserved: number;
};

/**
 * Each database's limit, in the order given (oldest first): the budget split evenly, the
 * remainder to the oldest, capped per database. Never more than the budget in all, as long as
 * there are no more databases than connections (see tooManyDatabases).
 */
export function splitConnections(policy: ConnectionPolicy, databases: number): number[] {
  if (databases <= 0) return [];
  const base = Math.floor(policy.perAccount / databases);
  const extra = policy.perAccount % databases;
  return Array.from({ length: databases }, (_, i) => Math.max(1, Math.min(policy.perDatabase, base + (i < extra ? 1 : 0))));
}

/** An account can hold at most one database per connection of its budget. */
export const tooManyDatabases = (policy: ConnectionPolicy, databases: number): boolean => databases > policy.perAccount;

/**
 * Whether the server can take the account's connections once it has `databases` databases:
 * the limits handed to every tenant role, with this account's at its new total, must fit in
 * max_connections less the superuser and platform reserves. Returns the refusal, or undefined.
 */
export function connectionRoom(policy: ConnectionPolicy, capacity: ConnectionCapacity, databases: number): string | undefined {
  const accountTotal = splitConnections(policy, databases).reduce((a, b) => a + b, 0);
  const usable = capacity.max_connections - capacity.superuser_reserved - policy.reserved;
  const needed = capacity.allotted - capacity.own + accountTotal;
  if (needed <= usable) return undefined;
  return `tenant connections would reach ${needed} of the ${usable} the server can give tenants (max_connections ${capacity.max_connections}, ${capacity.superuser_reserved} reserved for superusers, ${policy.reserved} for the platform)`;
}
