/**
 * Model deployments (issue 29, API-DECISIONS "Model deployments"): the request bodies (TypeBox,
 * checked by the params validator; unknown fields are 400 naming them) and the response, with
 * the contract's ranges and defaults in one place.
 */
import { Nullable, type Static, StringEnum, Type } from "../../../lib/contract";
import { IMAGE_NAME_MAX, IMAGE_NAME_PATTERN, JOB_COMMAND_MAX, MAX_JOB_CARDS } from "../../../lib/job-spec";

export const DEPLOYMENT_NAME_PATTERN = "^[a-z0-9][a-z0-9-]{0,62}$";
/** The provider name of a deployment's model in the model lists. */
export const DEPLOYMENT_PROVIDER = "deployment";
/** Replicas in a row that ended without ever becoming ready before the deployment is `failed`. */
export const FAILURES_TO_FAIL = 3;

const int = (minimum: number, maximum: number, description: string) => Type.Integer({ minimum, maximum, description });

/** The scaling fields: PATCH may change these (and env). */
const scalingFields = {
  minReplicas: Type.Optional(int(0, 10, "Replicas kept running with no traffic (default 0: scale to zero)")),
  maxReplicas: Type.Optional(int(1, 10, "The most replicas (default 1)")),
  targetInflight: Type.Optional(int(1, 1000, "Requests in flight per ready replica before another starts (default 4)")),
  idleTimeoutSeconds: Type.Optional(int(10, 86400, "Without a request this long, replicas stop down to minReplicas (default 300)")),
  coldStartTimeoutSeconds: Type.Optional(int(5, 3600, "How long a request waits for a replica to start (default 600), then 503")),
};
const envField = Type.Optional(Type.Record(Type.String(), Type.String(), { description: "The replicas' environment variables (values are never returned)" }));

export const DeploymentCreate = Type.Object(
  {
    name: Type.String({ pattern: DEPLOYMENT_NAME_PATTERN, description: "The model name requests use" }),
    command: Type.String({ minLength: 1, maxLength: JOB_COMMAND_MAX, description: "The shell command that starts the model server" }),
    containerImage: Type.Optional(Type.String({ minLength: 1, maxLength: IMAGE_NAME_MAX, pattern: IMAGE_NAME_PATTERN })),
    gpuType: Type.Optional(Type.String({ minLength: 1, maxLength: 200, pattern: "\\S" })),
    gpuCount: Type.Optional(int(1, MAX_JOB_CARDS, "Cards per replica (default 1)")),
    env: envField,
    port: int(1024, 65535, "The port the server listens on inside its job"),
    readinessPath: Type.Optional(
      Type.String({ minLength: 1, maxLength: 256, pattern: "^/[\\x21-\\x7e]*$", description: 'Ready once GET on it answers 2xx (default "/v1/models")' }),
    ),
    ...scalingFields,
  },
  { additionalProperties: false },
);
export type DeploymentCreateParams = Static<typeof DeploymentCreate>;

export const DeploymentPatch = Type.Object({ id: Type.String(), ...scalingFields, env: envField }, { additionalProperties: false });
export type DeploymentPatchParams = Static<typeof DeploymentPatch>;

/** Every setting with its default resolved: the stored document (env apart). */
export type DeploymentSpec = {
  command: string;
  containerImage: string | null;
  gpuType: string | null;
  gpuCount: number;
  port: number;
  readinessPath: string;
  minReplicas: number;
  maxReplicas: number;
  targetInflight: number;
  idleTimeoutSeconds: number;
  coldStartTimeoutSeconds: number;
};

export const DEFAULTS = {
  readinessPath: "/v1/models",
  minReplicas: 0,
  maxReplicas: 1,
  targetInflight: 4,
  idleTimeoutSeconds: 300,
  coldStartTimeoutSeconds: 600,
};

export function specOf(p: DeploymentCreateParams): DeploymentSpec {
  return {
    command: p.command,
    containerImage: p.containerImage ?? null,
    gpuType: p.gpuType?.trim() ?? null,
    gpuCount: p.gpuCount ?? 1,
    port: p.port,
    readinessPath: p.readinessPath ?? DEFAULTS.readinessPath,
    minReplicas: p.minReplicas ?? DEFAULTS.minReplicas,
    maxReplicas: p.maxReplicas ?? DEFAULTS.maxReplicas,
    targetInflight: p.targetInflight ?? DEFAULTS.targetInflight,
    idleTimeoutSeconds: p.idleTimeoutSeconds ?? DEFAULTS.idleTimeoutSeconds,
    coldStartTimeoutSeconds: p.coldStartTimeoutSeconds ?? DEFAULTS.coldStartTimeoutSeconds,
  };
}

export const DEPLOYMENT_STATUSES = ["idle", "starting", "ready", "failed"] as const;
export type DeploymentStatus = (typeof DEPLOYMENT_STATUSES)[number];

export const Deployment = Type.Object(
  {
    id: Type.String({ format: "uuid" }),
    name: Type.String(),
    model: Type.String({ description: "What requests send as `model`: the name" }),
    status: StringEnum([...DEPLOYMENT_STATUSES]),
    statusReason: Nullable(Type.String()),
    replicas: Type.Object({ desired: Type.Integer(), starting: Type.Integer(), ready: Type.Integer() }),
    command: Type.String(),
    containerImage: Nullable(Type.String()),
    gpuType: Nullable(Type.String()),
    gpuCount: Type.Integer(),
    envNames: Type.Array(Type.String(), { description: "The names of its variables (values are never returned)" }),
    port: Type.Integer(),
    readinessPath: Type.String(),
    minReplicas: Type.Integer(),
    maxReplicas: Type.Integer(),
    targetInflight: Type.Integer(),
    idleTimeoutSeconds: Type.Integer(),
    coldStartTimeoutSeconds: Type.Integer(),
    createdAt: Type.String({ format: "date-time" }),
  },
  { $id: "Deployment" },
);
export type DeploymentView = Static<typeof Deployment>;

export const DeploymentList = Type.Object({ deployments: Type.Array(Deployment) }, { $id: "DeploymentList" });

/** How many of a deployment's latest requests GET /api/deployments/:id/requests returns. */
export const RECENT_REQUESTS = 20;

export const DeploymentRequest = Type.Object(
  {
    id: Type.String({ format: "uuid" }),
    createdAt: Type.String({ format: "date-time" }),
    outcome: StringEnum(["ok", "error", "aborted", "timeout"]),
    errorCode: Nullable(Type.String()),
    promptTokens: Type.Integer(),
    completionTokens: Type.Integer(),
    durationMs: Type.Integer(),
    stream: Type.Boolean(),
  },
  { $id: "DeploymentRequest" },
);
export type DeploymentRequestView = Static<typeof DeploymentRequest>;

export const DeploymentRequestList = Type.Object(
  { requests: Type.Array(DeploymentRequest, { description: `The latest ${RECENT_REQUESTS}, newest first` }) },
  { $id: "DeploymentRequestList" },
);
