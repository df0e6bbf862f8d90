import { TypeCompiler } from "@sinclair/typebox/compiler";
import { checkRunJob, JobSpec, MAX_JOB_CARDS, storedJob } from "../../lib/job-spec";

const checkRequest = TypeCompiler.Compile(JobSpec);
/** The paths TypeBox names for what it refuses. */
const refused = (body: unknown) => [...checkRequest.Errors(body)].map((e) => e.path);

describe("job spec - one declaration of what a job asks for", () => {
  it.each<[string, Record<string, unknown>]>([
    ["a command alone", { command: "nvidia-smi" }],
    [
      "every field",
      {
        command: "x",
        gpuType: "A100",
        containerImage: "nvcr.io/nvidia/pytorch:24.01",
        timeoutSeconds: 60,
        queueTimeoutSeconds: 5,
        maxRetries: 2,
        priority: "high",
        gpuCount: 2,
        webhookUrl: "https://example.com/h",
        env: { A: "1" },
      },
    ],
    [
      "null for an optional field (absent, as the API always took it)",
      { command: "x", gpuType: null, containerImage: null, timeoutSeconds: null, priority: null },
    ],
  ])("job spec - accepts %s", (_name, body) => {
    expect(refused(body)).toEqual([]);
  });

  it.each<[string, Record<string, unknown>, string]>([
    ["an unknown field", { command: "x", dependsOn: ["a"] }, "/dependsOn"],
    ["an empty command", { command: "" }, "/command"],
    ["no command", { gpuType: "A100" }, "/command"],
    ["a blank gpuType", { command: "x", gpuType: " " }, "/gpuType"],
    ["a priority outside the three", { command: "x", priority: "urgent" }, "/priority"],
    ["more cards than a job may take", { command: "x", gpuCount: MAX_JOB_CARDS + 1 }, "/gpuCount"],
    ["a fractional time limit", { command: "x", timeoutSeconds: 1.5 }, "/timeoutSeconds"],
    ["an image name with a space", { command: "x", containerImage: "busy box" }, "/containerImage"],
  ])("job spec - refuses %s, naming the field", (_name, body, path) => {
    expect(refused(body)).toContain(path);
  });

  it("job spec - the stored document drops nulls and env, trims gpuType and resolves the time limit", () => {
    const stored = storedJob({ command: "x", gpuType: "  A100 ", containerImage: null, env: { TOKEN: "secret" }, priority: "low" }, 3600);
    expect(stored).toEqual({ command: "x", gpuType: "A100", priority: "low", timeoutSeconds: 3600 });
    expect(storedJob({ command: "x", timeoutSeconds: 5 }, 3600).timeoutSeconds).toBe(5);
  });

  it("job spec - the node's check takes a placement with the stored job, tolerates fields a newer scheduler adds, refuses a bad one", () => {
    const run = { jobId: "j1", gpuUuid: "GPU-1", gpuUuids: ["GPU-1"], attempt: 1, ...storedJob({ command: "x" }, 60), env: { A: "1" } };
    expect(checkRunJob.Check(run)).toBe(true);
    expect(checkRunJob.Check({ ...run, somethingNewer: true })).toBe(true);
    expect(checkRunJob.Check({ ...run, timeoutSeconds: 0 })).toBe(false);
    expect(checkRunJob.Check({ ...run, gpuUuids: Array.from({ length: MAX_JOB_CARDS + 1 }, (_, i) => `GPU-${i}`) })).toBe(false);
  });
});
