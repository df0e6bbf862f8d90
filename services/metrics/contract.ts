/** The metrics service's route's response (lib/contract.ts): published in the OpenAPI document and typing the handler. */
import { type Static, Type } from "../../lib/contract";

export const GpuHistorySample = Type.Object(
  {
    at: Type.String({ format: "date-time", description: "The start of the bucket" }),
    utilization: Type.Number({ description: "percent (0-100), the mean of the heartbeats in the bucket" }),
    memoryUsed: Type.Number({ description: "MiB, the mean of the heartbeats in the bucket" }),
    memoryTotal: Type.Number({ description: "MiB" }),
  },
  { $id: "GpuHistorySample" },
);

export const GpuStatusHistory = Type.Object(
  {
    bucketSeconds: Type.Integer({ minimum: 1, description: "One sample per card per bucket of this many seconds" }),
    windowSeconds: Type.Integer({ minimum: 1, description: "Samples cover the last this many seconds" }),
    gpus: Type.Array(
      Type.Object({
        uuid: Type.String({ description: "The card's UUID, as in GET /api/gpu/status" }),
        samples: Type.Array(GpuHistorySample, { description: "Oldest first; a bucket with no heartbeat has no sample" }),
      }),
    ),
  },
  { $id: "GpuStatusHistory" },
);
export type GpuStatusHistory = Static<typeof GpuStatusHistory>;
