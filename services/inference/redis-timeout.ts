/** The inference service's Redis calls that must not wait on a slow Redis (catalogue, batch pacing). */

/** How long a Redis command may take before its caller goes on without it. */
const REDIS_TIMEOUT_MS = 250;

/** A Redis command that gives up after REDIS_TIMEOUT_MS (the caller goes on without it). */
export function withTimeout<T>(work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error("Redis did not answer in time")), REDIS_TIMEOUT_MS);
  });
  return Promise.race([work, deadline]).finally(() => clearTimeout(timer));
}
