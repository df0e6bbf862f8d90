/**
 * Shape checks for what gpu-nodes send (lib/gpu-protocol.ts). A malformed message is logged and
 * dropped: retrying it would never help.
 */
import { isGpuCard, JobEvent, NodeHeartbeat, OUTPUT_TAIL_BYTES } from "../../lib/gpu-protocol";
import { storableText } from "../../lib/output-encoding";

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

/** Room for the tail, its truncation note and the escaping of odd bytes; a real node sends less. */
const MAX_OUTPUT_CHARS = 4 * OUTPUT_TAIL_BYTES;
const MAX_ERROR_CHARS = 2000;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
const isOutput = (v: Record<string, unknown>) => typeof v.output === "string";

/**
 * A well-formed job event, made storable whatever the node put in it: NUL and lone surrogates
 * replaced, an oversized output cut to its end, a malformed `outputBase64` dropped. A terminal
 * event is never refused for its content, so it always frees its card.
 */
export function asJobEvent(v: unknown): JobEvent | null {
  const event = checkJobEvent(v);
  if (!event || event.type === "started") return event;
  const { outputBase64, ...rest } = event;
  const clean = { ...rest, output: storableText(event.output.slice(-MAX_OUTPUT_CHARS)) };
  const bytes = typeof outputBase64 === "string" && outputBase64.length <= MAX_OUTPUT_CHARS && BASE64.test(outputBase64) ? { outputBase64 } : {};
  if (event.type === "failed") return { ...clean, ...bytes, errorMessage: storableText(event.errorMessage).slice(0, MAX_ERROR_CHARS) } as JobEvent;
  return { ...clean, ...bytes } as JobEvent;
}

function checkJobEvent(v: unknown): JobEvent | null {
  if (!isObj(v) || !isStr(v.jobId) || !UUID.test(v.jobId) || !isStr(v.nodeId) || !isStr(v.gpuUuid) || !isTime(v.at)) return null;
  switch (v.type) {
    case "started":
      return v as JobEvent;
    case "finished":
      return isNum(v.exitCode) && Number.isInteger(v.exitCode) && isOutput(v) ? (v as JobEvent) : null;
    case "failed":
      return isStr(v.errorMessage) && isIntOrNull(v.exitCode) && isOutput(v) ? (v as JobEvent) : null;
    case "cancelled":
      return isIntOrNull(v.exitCode) && isOutput(v) ? (v as JobEvent) : null;
    default:
      return null;
  }
}
