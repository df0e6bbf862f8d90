/** The submission rules of a GPU job (params + cluster facts → the job or the field at fault): tables, no broker. */
import { checkSubmission, CreateJobParams, SubmissionFacts } from "../../services/gpu-scheduler/api/submission";

const IDS = { id: "job-1", clientId: "client-1" };
/** Two nodes: n1 with 4 A100s, n2 with 2 A100s and 1 H100. */
const MOST: Record<string, number> = { "": 4, a100: 4, h100: 1, nvidia: 4 };
const facts = (over: Partial<SubmissionFacts> = {}): SubmissionFacts => ({
  cardNames: ["NVIDIA A100", "NVIDIA H100"],
  warmingUp: false,
  mostCardsOnOneNode: (gpuType) => MOST[(gpuType ?? "").toLowerCase()] ?? 0,
  runningGpus: null,
  allowedRegistries: ["docker.io", "ghcr.io"],
  defaultTimeoutS: 3600,
  ...over,
});
const refusedField = (params: CreateJobParams, f: SubmissionFacts) => {
  const out = checkSubmission(params, f, IDS);
  return out.ok ? null : out.errors;
};

describe("gpu-scheduler submission - refusals", () => {
  test.each<[string, CreateJobParams, Partial<SubmissionFacts>, string, string | RegExp]>([
    ["a blank command", { command: " \n\t" }, {}, "command", "The 'command' field must not be blank."],
    ["an env name the node refuses", { command: "x", env: { "1BAD": "v" } }, {}, "env", /variable name "1BAD" is not allowed/],
    ["an env variable the platform sets", { command: "x", env: { CUDA_VISIBLE_DEVICES: "0" } }, {}, "env", /NVIDIA_\* and CUDA_\*/],
    ["a gpuType no card matches", { command: "x", gpuType: "T4" }, {}, "gpuType", 'No GPU in the cluster matches "T4". Known types: NVIDIA A100, NVIDIA H100'],
    [
      "more cards of the type than any one node has",
      { command: "x", gpuType: "h100", gpuCount: 2 },
      {},
      "gpuCount",
      'No GPU node has 2 GPUs matching "h100" of one type; the most on one node is 1.',
    ],
    [
      "more cards than any one node has (any type)",
      { command: "x", gpuCount: 5 },
      {},
      "gpuCount",
      "No GPU node has 5 GPUs of one type; the most on one node is 4.",
    ],
    [
      "more cards than the account's running-GPU limit",
      { command: "x", gpuCount: 3 },
      { runningGpus: 2 },
      "gpuCount",
      "The 'gpuCount' field (3) exceeds this account's limit of 2 running GPUs.",
    ],
    [
      "an image from a registry not allowed",
      { command: "x", containerImage: "quay.io/team/trainer:1" },
      {},
      "containerImage",
      "The 'containerImage' field is not allowed: registry quay.io is not one of the operator's allowed registries.",
    ],
    [
      "an image from a loopback registry",
      { command: "x", containerImage: "localhost:5000/trainer" },
      {},
      "containerImage",
      /registry localhost:5000 is a loopback or private address/,
    ],
    ["the first rule broken is the answer (command before env)", { command: "", env: { "1BAD": "v" } }, {}, "command", /must not be blank/],
    ["the first rule broken is the answer (gpuType before image)", { command: "x", gpuType: "T4", containerImage: "quay.io/a" }, {}, "gpuType", /T4/],
  ])("submission - %s", (_name, params, over, field, message) => {
    const errors = refusedField(params, facts(over));
    expect(errors).toHaveLength(1);
    expect(errors![0].field).toBe(field);
    if (typeof message === "string") expect(errors![0].message).toBe(message);
    else expect(errors![0].message).toMatch(message);
  });

  test("submission - an unknown gpuType's refusal lists the known types in its details", () => {
    expect(refusedField({ command: "x", gpuType: "T4" }, facts())).toEqual([
      { field: "gpuType", message: expect.any(String), knownTypes: ["NVIDIA A100", "NVIDIA H100"] },
    ]);
  });
});

describe("gpu-scheduler submission - accepted", () => {
  test.each<[string, CreateJobParams, Partial<SubmissionFacts>]>([
    ["an unknown gpuType while the view warms up (the job waits)", { command: "x", gpuType: "T4" }, { warmingUp: true }],
    ["an unknown gpuType while no card is known", { command: "x", gpuType: "T4" }, { cardNames: [] }],
    ["a gpuType matching part of a card's name, in any case", { command: "x", gpuType: "a100" }, {}],
    ["more cards than one node has while the view warms up", { command: "x", gpuCount: 8 }, { warmingUp: true }],
    ["more cards than one node has while no card is known", { command: "x", gpuCount: 8 }, { cardNames: [] }],
    ["as many cards as the account's limit", { command: "x", gpuCount: 2 }, { runningGpus: 2 }],
    ["one card is never checked against the limit", { command: "x" }, { runningGpus: 0 }],
    ["an image from an allowed registry", { command: "x", containerImage: "ghcr.io/team/trainer:1" }, {}],
    ["a Docker Hub image without a registry", { command: "x", containerImage: "pytorch/pytorch" }, {}],
  ])("submission - %s", (_name, params, over) => {
    const out = checkSubmission(params, facts(over), IDS);
    expect(out).toMatchObject({ ok: true, job: { id: IDS.id, clientId: IDS.clientId, spec: { command: "x" } } });
  });

  test("submission - what a request leaves out is left out of the stored document, but its time limit", () => {
    expect(checkSubmission({ command: "nvidia-smi" }, facts(), IDS)).toEqual({
      ok: true,
      job: { id: "job-1", clientId: "client-1", spec: { command: "nvidia-smi", timeoutSeconds: 3600 }, env: {} },
    });
  });

  test("submission - what a request sets is stored as asked, its env apart; null means absent", () => {
    const params: CreateJobParams = {
      command: "python train.py",
      gpuType: " any ",
      containerImage: "ghcr.io/team/trainer:1",
      timeoutSeconds: 60,
      env: { EPOCHS: "3" },
      queueTimeoutSeconds: 30,
      maxRetries: 2,
      priority: "high",
      gpuCount: 2,
      webhookUrl: "https://hooks.example.com/gpu",
    };
    const { env, ...spec } = params;
    expect(checkSubmission(params, facts({ runningGpus: 4 }), IDS)).toEqual({ ok: true, job: { ...IDS, spec: { ...spec, gpuType: "any" }, env } });
    expect(checkSubmission({ command: "x", gpuType: null, containerImage: null }, facts(), IDS)).toEqual({
      ok: true,
      job: { ...IDS, spec: { command: "x", timeoutSeconds: 3600 }, env: {} },
    });
  });
});
