/** The model routes' responses (lib/contract.ts): published in the OpenAPI document and typing the handlers. */
import { type Static, Type } from "../../lib/contract";

export const Model = Type.Object(
  {
    name: Type.String(),
    provider: Type.String({ pattern: "^[a-z0-9_-]+$" }),
    parameterSize: Type.String({ pattern: "^[0-9.]+B$" }),
    description: Type.String(),
  },
  { $id: "Model" },
);
export type PublicModel = Static<typeof Model>;

export const ModelList = Type.Object({ models: Type.Array(Model) }, { $id: "ModelList" });

export const InferenceResult = Type.Object(
  {
    id: Type.String(),
    model: Type.String(),
    response: Type.String(),
    tokensUsed: Type.Integer({ minimum: 0 }),
    durationMs: Type.Integer({ minimum: 0 }),
  },
  { $id: "InferenceResult" },
);
export type InferenceResult = Static<typeof InferenceResult>;

// A map of provider names: published as additionalProperties (Type.Record would publish patternProperties).
export const ProviderHealth = Type.Unsafe<Record<string, boolean>>({
  $id: "ProviderHealth",
  type: "object",
  description: "One boolean per configured provider, named with its lowercase name",
  additionalProperties: Type.Boolean(),
  examples: [{ ollama: true }],
});

/** The other answer of `infer`: the stream the handler returns with "stream": true. */
export const INFER_STREAM = {
  schema: Type.String(),
  description:
    'With "stream": true: server-sent events. Each chunk is `data: {"id","model","delta"}`; the last is ' +
    '`data: {…Inference result, "done": true}`; a provider failure mid-stream ends it with `data: {"error": {…}}`.',
};
