/**
 * Names of the broker events that cross processes, for the services that send them (declared in
 * their schema's `emits`, which the bus permissions follow) and handle them. Each event's shape and
 * check stay with its emitter: `inference.completed` in services/inference/events.ts,
 * `job.statusChanged` in services/gpu-scheduler/status-events.ts, `apiKey.replaced` (`{ clientId }`)
 * in services/auth/auth.service.ts.
 */

/** Emitted by inference once per finished inference, read by metrics. */
export const INFERENCE_COMPLETED = "inference.completed";

/** Broadcast by gpu-scheduler once per job status change a client can see, to every scheduler replica. */
export const JOB_STATUS_CHANGED = "job.statusChanged";

/** Broadcast by auth when an account's API key is replaced, to every gateway replica (its cached answers for that account end). */
export const API_KEY_REPLACED = "apiKey.replaced";

/** Broadcast by auth when restricted tokens are deleted (`{ tokens: [{ id, clientId }] }`), to every gateway replica (their cached answers end). */
export const TOKEN_REVOKED = "token.revoked";
