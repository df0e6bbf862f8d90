/**
 * Shape checks for what gpu-nodes send (lib/gpu-protocol.ts). A malformed message is logged and
 * dropped: retrying it would never help.
 */
import { isGpuCard, JobEvent, NodeHeartbeat } from "../../lib/gpu-protocol";

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
const isStr = (v: unknown): v is string => typeof v === "string" && v.length > 0;
const isNum = (v: unknown): v is number => typeof v === "number" && Number.isFinite(v);
const isTime = (v: unknown): v is string => typeof v === "string" && !Number.isNaN(Date.parse(v));
const isIntOrNull = (v: unknown) => v === null || (isNum(v) && Number.isInteger(v));

export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;


export function asHeartbeat(v: unknown): NodeHeartbeat | null {
  if (!isObj(v) || !isStr(v.nodeId) || !Array.isArray(v.cards) || !Array.isArray(v.runningJobIds)) return null;
  if (!v.cards.every(isGpuCard) || !v.runningJobIds.every(isStr)) return null;
  if (v.executor !== "docker" && v.executor !== "process") return null;
  return v as NodeHeartbeat;
}

export function asJobEvent(v: unknown): JobEvent | null {
  if (!isObj(v) || !isStr(v.jobId) || !UUID.test(v.jobId) || !isStr(v.nodeId) || !isStr(v.gpuUuid) || !isTime(v.at)) return null;
  switch (v.type) {
    case "started":
      return v as JobEvent;
    case "finished":
      return isNum(v.exitCode) && Number.isInteger(v.exitCode) && typeof v.output === "string" ? (v as JobEvent) : null;
    case "failed":
      return isStr(v.errorMessage) && isIntOrNull(v.exitCode) && typeof v.output === "string" ? (v as JobEvent) : null;
    case "cancelled":
      return isIntOrNull(v.exitCode) && typeof v.output === "string" ? (v as JobEvent) : null;
    default:
      return null;
  }
}
