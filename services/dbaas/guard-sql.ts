/**
 * The platform's objects inside each client database (schema dbaas_guard, the admin's): the
 * extension guard (extension-sql.ts) and, with a pooled endpoint, the pooler's lookup
 * (pooler-sql.ts). Made when a database is provisioned; the reconciler brings older databases,
 * or all after a settings change, to the configuration (extensions.ts), as recorded per database.
 */
import { extensionGuardSql, policyOf } from "./extension-sql";
import { poolerLookupSql } from "./pooler-sql";

export type GuardConfig = {
  /** DBAAS_EXTENSIONS */
  extensions: readonly string[];
  /** DBAAS_POOLER_ROLE when a pooled endpoint is configured (DBAAS_POOLED_PORT). */
  poolerRole?: string;
};

export const guardSql = (guard: GuardConfig): string =>
  extensionGuardSql(guard.extensions) + (guard.poolerRole ? `;\n${poolerLookupSql(guard.poolerRole)}` : "");

/** Recorded per database (databases.extension_policy): a database whose record differs gets guardSql again. */
export const guardPolicy = (guard: GuardConfig): string => policyOf(guard.extensions, guard.poolerRole);
