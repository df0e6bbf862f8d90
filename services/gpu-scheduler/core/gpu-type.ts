/**
 * The one rule for a requested GPU type (the `gpuType` of a job): compared case-insensitively,
 * trimmed, runs of spaces as one; it matches every card whose name contains it; absent, empty or
 * "any" matches every card. Used when a job is created (refused if no known card matches), when
 * it is stored (its queue partition) and when it is placed.
 */

/** `gpuType` as compared: lower case, trimmed, single spaces; null (no type) is "". */
export const normalizeGpuType = (gpuType: string | null): string => (gpuType === null ? "" : gpuType.trim().replace(/\s+/g, " ").toLowerCase());

/** Whether a request for `gpuType` takes any card (no type, empty, or "any"). */
export const isAnyGpuType = (gpuType: string | null): boolean => ["", "any"].includes(normalizeGpuType(gpuType));

/** The type a job asks for as stored: null when it takes any card. */
export const requestedGpuType = (gpuType: string | null | undefined): string | null => (gpuType && !isAnyGpuType(gpuType) ? gpuType : null);

/** Whether a card called `cardName` satisfies a request for `gpuType` (null or "any": every card). */
export function matchesGpuType(cardName: string, gpuType: string | null): boolean {
  return isAnyGpuType(gpuType) || normalizeGpuType(cardName).includes(normalizeGpuType(gpuType));
}

/** The card names in `names` a request for `gpuType` can run on. */
export function matchingNames(names: Iterable<string>, gpuType: string | null): string[] {
  return [...new Set(names)].filter((name) => matchesGpuType(name, gpuType));
}
