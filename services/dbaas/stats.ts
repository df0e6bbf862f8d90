/**
 * `dbaas.stats`: the database service's figures for the metrics service (services/metrics). dbaas
 * answers it; a reader takes the shape from here.
 */
export const DBAAS_STATS_ACTION = "dbaas.stats";

export type DatabaseStats = {
  databasesByState: { active: number; provisioning: number; destroying: number; failed: number; readOnly: number };
  storageMbByState: { active: number; readOnly: number };
  /**
   * The tenant server's WAL archiving, with point-in-time restore configured (empty otherwise):
   * `failing` 1 while its latest attempt failed, `failedTotal`, `secondsSinceArchived` (-1: never).
   */
  walArchive?: Record<string, number>;
};
