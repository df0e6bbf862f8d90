/**
 * Names of the broker events that cross processes, for the bus-permission table
 * (lib/bus-permissions.ts) and the services that send and handle them. Each event's shape and
 * check stay with its emitter: `inference.completed` in services/inference/events.ts,
 * `job.statusChanged` in services/gpu-scheduler/status-events.ts.
 */

/** Emitted by inference once per finished inference, read by metrics. */
export const INFERENCE_COMPLETED = "inference.completed";

/** Broadcast by gpu-scheduler once per job status change a client can see, to every scheduler replica. */
export const JOB_STATUS_CHANGED = "job.statusChanged";
