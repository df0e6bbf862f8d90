/** Whether a node takes a job placed on it (services/gpu-node/admission.ts): a table over node facts, no broker. */
import { Admission, admissionError, admitJob, NodeFacts } from "../../services/gpu-node/admission";
import type { RunJobParams } from "../../lib/job-spec";
import { simulatedCard } from "../support/sandbox";

const [a, b, c] = [simulatedCard("GPU-a"), simulatedCard("GPU-b"), simulatedCard("GPU-c")];

const facts = (over: Partial<NodeFacts> = {}): NodeFacts => ({ accepting: true, cards: [a, b, c], jobs: new Map(), ...over });
const running = (...entries: Array<[string, number, string[]]>) => new Map(entries.map(([jobId, attempt, gpuUuids]) => [jobId, { attempt, gpuUuids }]));
const params = (over: Partial<RunJobParams> = {}): RunJobParams => ({ jobId: "job-1", gpuUuid: "GPU-a", command: "true", ...over });
const refused = (error: Extract<Admission, { kind: "refused" }>["error"], stopEarlierAttempt?: true): Admission => ({
  kind: "refused",
  error,
  ...(stopEarlierAttempt && { stopEarlierAttempt }),
});

describe("gpu-node admission", () => {
  test.each<[string, NodeFacts, RunJobParams, Admission]>([
    ["one free card: run on it as attempt 1", facts(), params(), { kind: "run", cards: [a], attempt: 1 }],
    [
      "several free cards: run on all, the first first",
      facts(),
      params({ gpuUuid: "GPU-b", gpuUuids: ["GPU-b", "GPU-a"] }),
      { kind: "run", cards: [b, a], attempt: 1 },
    ],
    ["a later attempt of a job not here: run it as that attempt", facts(), params({ attempt: 3 }), { kind: "run", cards: [a], attempt: 3 }],
    [
      "a node that cannot isolate jobs refuses first, whatever else is wrong",
      facts({ refusal: "no sandbox here", accepting: false }),
      params({ gpuUuid: "GPU-x", env: { "1BAD": "x" } }),
      refused({ code: "SERVICE_UNAVAILABLE", message: "no sandbox here" }),
    ],
    [
      "a bad env is named before the node's shutdown",
      facts({ accepting: false }),
      params({ env: [] as unknown as Record<string, string> }),
      refused({ code: "VALIDATION_FAILED", field: "env", message: "The 'env' field must be an object of variable names to string values." }),
    ],
    [
      "a stopping (or not yet started) node",
      facts({ accepting: false }),
      params(),
      refused({ code: "SERVICE_UNAVAILABLE", message: "This GPU node is shutting down" }),
    ],
    [
      "gpuUuids not starting with gpuUuid",
      facts(),
      params({ gpuUuids: ["GPU-b", "GPU-a"] }),
      refused({ code: "VALIDATION_FAILED", field: "gpuUuids", message: "The 'gpuUuids' field must list distinct cards, the first being 'gpuUuid'." }),
    ],
    [
      "gpuUuids naming a card twice",
      facts(),
      params({ gpuUuids: ["GPU-a", "GPU-a"] }),
      refused({ code: "VALIDATION_FAILED", field: "gpuUuids", message: "The 'gpuUuids' field must list distinct cards, the first being 'gpuUuid'." }),
    ],
    [
      "the first card not of this node is named",
      facts(),
      params({ gpuUuids: ["GPU-a", "GPU-x", "GPU-y"] }),
      refused({ code: "NOT_FOUND", message: "GPU GPU-x is not a card of this node" }),
    ],
    [
      "an earlier attempt still here: stop it, and refuse until it is gone",
      facts({ jobs: running(["job-1", 1, ["GPU-a"]]) }),
      params({ attempt: 2 }),
      refused({ code: "INVALID_STATE", message: "An earlier attempt of job job-1 is still stopping on this node" }, true),
    ],
    [
      "a repeated call for the attempt running here: nothing to do",
      facts({ jobs: running(["job-1", 2, ["GPU-a", "GPU-b"]]) }),
      params({ gpuUuids: ["GPU-a", "GPU-b"], attempt: 2 }),
      { kind: "already-running" },
    ],
    [
      "the same job on other cards",
      facts({ jobs: running(["job-1", 1, ["GPU-a"]]) }),
      params({ gpuUuids: ["GPU-a", "GPU-b"] }),
      refused({ code: "INVALID_STATE", message: "Job job-1 already runs on other cards of this node" }),
    ],
    [
      "an older attempt than the one running here",
      facts({ jobs: running(["job-1", 2, ["GPU-a"]]) }),
      params({ attempt: 1 }),
      refused({ code: "INVALID_STATE", message: "Job job-1 already runs on other cards of this node" }),
    ],
    [
      "one of its cards busy with another job: the first busy one is named",
      facts({ jobs: running(["other", 1, ["GPU-c", "GPU-b"]]) }),
      params({ gpuUuids: ["GPU-a", "GPU-b", "GPU-c"] }),
      refused({ code: "INVALID_STATE", message: "GPU GPU-b is busy with another job" }),
    ],
    [
      "cards of other jobs that it does not ask for: run",
      facts({ jobs: running(["other", 1, ["GPU-c"]]) }),
      params({ gpuUuids: ["GPU-a", "GPU-b"] }),
      { kind: "run", cards: [a, b], attempt: 1 },
    ],
  ])("gpu-node admission - %s", (_name, node, call, expected) => {
    expect(admitJob(node, call)).toEqual(expected);
  });

  test.each([
    [{ code: "SERVICE_UNAVAILABLE", message: "This GPU node is shutting down" }, 503, "SERVICE_UNAVAILABLE", null],
    [{ code: "NOT_FOUND", message: "GPU GPU-x is not a card of this node" }, 404, "NOT_FOUND", null],
    [{ code: "INVALID_STATE", message: "GPU GPU-b is busy with another job" }, 409, "INVALID_STATE", null],
    [{ code: "VALIDATION_FAILED", field: "gpuUuids", message: "bad" }, 400, "VALIDATION_FAILED", [{ field: "gpuUuids", message: "bad" }]],
  ] as const)("gpu-node admission - a refusal %# throws the API error of its kind", (error, status, type, details) => {
    const thrown = admissionError(error) as Error & { code: number; type: string; data: unknown };
    expect({ message: thrown.message, code: thrown.code, type: thrown.type, data: thrown.data }).toEqual({
      message: error.code === "VALIDATION_FAILED" ? "Request validation failed" : error.message,
      code: status,
      type,
      data: details,
    });
  });
});
