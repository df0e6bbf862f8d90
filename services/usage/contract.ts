/** The usage routes' responses (lib/contract.ts): published in the OpenAPI document and typing the handlers. */
import { Nullable, StringEnum, Type } from "../../lib/contract";
import { QUOTA_RESOURCES } from "../../lib/usage-protocol";

const ByName = Type.Record(Type.String(), Type.Number());

export const Usage = Type.Object(
  {
    from: Type.String({ format: "date-time" }),
    to: Type.String({ format: "date-time" }),
    gpu: Type.Object({
      jobs: Type.Integer({ description: "Job attempts with GPU time in the window" }),
      gpuSeconds: Type.Number({ description: "The part of each job's held time inside the window, × its cards" }),
      byGpuType: ByName,
    }),
    inference: Type.Object({ requests: Type.Integer(), tokens: Type.Integer(), byModel: ByName }),
    databases: Type.Object({
      active: Type.Integer({ description: "Now" }),
      storageMb: Type.Number({ description: "Now, MiB" }),
      storageMbHours: Type.Number({ description: "Storage sampled hourly, inside the window" }),
    }),
    credits: Type.Number(),
  },
  { $id: "Usage" },
);

export const Quota = Type.Object({
  resource: StringEnum([...QUOTA_RESOURCES]),
  period: Type.Unsafe<"month" | null>({ type: ["string", "null"], enum: ["month", null] }),
  limit: Nullable(Type.Number({ description: "null: unlimited" })),
  used: Type.Number(),
  resetsAt: Nullable(Type.String({ format: "date-time" })),
});

export const QuotaList = Type.Object({ quotas: Type.Array(Quota) }, { $id: "QuotaList" });
