/** The inference service's Redis calls that must not wait on a slow Redis (catalogue, batch pacing). */
import { withTimeout } from "../../lib/health";

/** How long a Redis command may take before its caller goes on without it. */
const REDIS_TIMEOUT_MS = 250;

/** A Redis command that gives up after REDIS_TIMEOUT_MS (the caller goes on without it). */
export const withRedisTimeout = <T>(work: Promise<T>): Promise<T> => withTimeout(work, REDIS_TIMEOUT_MS);
