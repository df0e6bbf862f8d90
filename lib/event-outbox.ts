// Renamed lib/publish-queue.ts (an in-memory queue, not an outbox); kept until
// services/gpu-node/gpu-node.service.ts (being split) imports PublishQueue from there.
export { PublishQueue as EventOutbox } from "./publish-queue";
