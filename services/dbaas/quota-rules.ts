/**
 * The storage quota's rules, pure: when a database is over its quota (frozen) or back under it
 * (thawed), and when it is near enough to be watched closely (quota-activity.ts).
 */
export const MIB = 1048576;

export type QuotaState = { storageBytes: number; maxStorageMb: number; readOnly: boolean };
export type QuotaAction = "freeze" | "thaw" | "none";

/** Over means strictly more bytes than the quota; back at or under it, rights come back. */
export function decideQuota({ storageBytes, maxStorageMb, readOnly }: QuotaState): QuotaAction {
  const over = storageBytes > maxStorageMb * MIB;
  if (over && !readOnly) return "freeze";
  if (!over && readOnly) return "thaw";
  return "none";
}

/** Above this share of its quota a writable database is measured every DBAAS_QUOTA_NEAR_CHECK_S (quota-activity.ts). */
export const NEAR_RATIO = 0.8;

export const isNearQuota = ({ storageBytes, maxStorageMb, readOnly }: QuotaState): boolean => !readOnly && storageBytes > NEAR_RATIO * maxStorageMb * MIB;
