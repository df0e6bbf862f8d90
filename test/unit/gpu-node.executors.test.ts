/** Pure parts of the executors and the event outbox: container requests, job env, retries. */
import type { NodeCard } from "../../services/gpu-node/discovery";
import { containerSpec, ContainerContext, dockerMessage, pullFailureReason, LABEL_GPU, LABEL_JOB, LABEL_NAMESPACE, LABEL_NODE } from "../../services/gpu-node/docker-executor";
import { EventOutbox } from "../../services/gpu-node/outbox";
import { processJobEnv, withoutNvidiaVariables } from "../../services/gpu-node/process-executor";

const simulated: NodeCard = { uuid: "GPU-sim-1", index: 0, name: "RTX", memoryTotal: 12288, memoryUsed: 0, utilization: 0, temperature: 30, simulated: true };
const real: NodeCard = { ...simulated, uuid: "GPU-2b9e4c7d-81a6-3f05-c7d2-5e0a91b4f368", simulated: false };
const context: ContainerContext = {
  nodeId: "node-7",
  namespace: "prod",
  defaultImage: "nvidia/cuda:12.4.1-base-ubuntu22.04",
  limits: { memoryMb: 2048, cpus: 1.5, pids: 256, network: "none" },
};

describe("gpu-node executors - container request", () => {
  const spec = containerSpec({ jobId: "job-1", card: real, command: "nvidia-smi && echo ok" }, context);

  test("gpu-node executors - the command runs under sh -c with the default image", () => {
    expect(spec.Image).toBe(context.defaultImage);
    expect(spec.Entrypoint?.[0]).toBe("sh");
    expect(spec.Entrypoint?.[1]).toBe("-c");
    expect(spec.Cmd).toEqual(["nvidia-smi && echo ok"]);
    expect(containerSpec({ jobId: "j", card: real, command: "true", containerImage: "pytorch/pytorch:2.3.0" }, context).Image).toBe("pytorch/pytorch:2.3.0");
  });

  test("gpu-node executors - hardened as untrusted code", () => {
    const host = spec.HostConfig!;
    expect(spec.User).toBe("65534:65534");
    expect(host.Privileged).toBe(false);
    expect(host.CapDrop).toEqual(["ALL"]);
    expect(host.SecurityOpt).toEqual(["no-new-privileges"]);
    expect(host.ReadonlyRootfs).toBe(true);
    expect(host.NetworkMode).toBe("none");
    expect(spec.NetworkDisabled).toBe(true);
    expect(host.Binds).toEqual([]);
    expect(host.Mounts).toEqual([]);
    expect(host.PidsLimit).toBe(256);
    expect(host.Memory).toBe(2048 * 1024 * 1024);
    expect(host.MemorySwap).toBe(host.Memory);
    expect(host.NanoCpus).toBe(1.5e9);
    expect(host.AutoRemove).toBe(false);
    expect(Object.keys(host.Tmpfs ?? {})).toEqual(["/tmp"]);
  });

  test("gpu-node executors - a real card is requested by UUID, alone", () => {
    expect(spec.HostConfig!.DeviceRequests).toEqual([{ Driver: "nvidia", DeviceIDs: [real.uuid], Capabilities: [["gpu"]] }]);
    expect(spec.Env).toContain(`NVIDIA_VISIBLE_DEVICES=${real.uuid}`);
    expect(spec.Env!.filter((e) => e.startsWith("NVIDIA_"))).toHaveLength(1);
  });

  test("gpu-node executors - a simulated card requests no device and sets no NVIDIA_*", () => {
    const sim = containerSpec({ jobId: "job-1", card: simulated, command: "true" }, context);
    expect(sim.HostConfig!.DeviceRequests).toEqual([]);
    expect(sim.Env!.some((e) => e.startsWith("NVIDIA_"))).toBe(false);
  });

  test("gpu-node executors - labels name the job, node, card and namespace", () => {
    expect(spec.Labels).toEqual({ [LABEL_JOB]: "job-1", [LABEL_NODE]: "node-7", [LABEL_GPU]: real.uuid, [LABEL_NAMESPACE]: "prod" });
  });

  test("gpu-node executors - an operator-allowed network is used as given", () => {
    const open = containerSpec({ jobId: "j", card: real, command: "true" }, { ...context, limits: { ...context.limits, network: "bridge" } });
    expect(open.HostConfig!.NetworkMode).toBe("bridge");
    expect(open.NetworkDisabled).toBe(false);
  });

  test.each([
    ["the engine's JSON message", Object.assign(new Error("(HTTP code 404) no such image - x"), { json: { message: "No such image: x:latest" } }), "No such image: x:latest"],
    ["the HTTP prefix is dropped", new Error("(HTTP code 500) server error - pull access denied for x"), "pull access denied for x"],
    ["long text is bounded", new Error("y".repeat(1000)), `${"y".repeat(297)}...`],
    ["newlines become spaces", new Error("a\nb"), "a b"],
    ["addresses are masked", Object.assign(new Error("x"), { statusCode: 500, json: { message: "lookup r.io on 10.1.2.3:53: no such host" } }), "lookup r.io on <address>: no such host"],
    ["a socket error says only that the engine did not answer", Object.assign(new Error("connect ENOENT /var/run/docker.sock"), { code: "ENOENT" }), "the container engine did not answer"],
  ])("gpu-node executors - docker error message: %s", (_name, err, expected) => {
    expect(dockerMessage(err)).toBe(expected);
  });

  const engine = (message: string) => Object.assign(new Error(message), { statusCode: 500, json: { message } });
  test.each([
    ["unknown repository", engine("pull access denied for nosuch/image, repository does not exist or may require 'docker login'"), "the image does not exist in its registry, or the registry requires credentials"],
    ["unknown tag", engine("manifest for busybox:nope not found: manifest unknown: manifest unknown"), "the image does not exist in its registry, or the registry requires credentials"],
    ["registry down", engine('Get "http://127.0.0.1:9/v2/": dial tcp 127.0.0.1:9: connect: connection refused'), "its registry could not be reached"],
    ["no DNS", engine('Get "https://registry-1.docker.io/v2/": dial tcp: lookup registry-1.docker.io on 10.0.0.2:53: no such host'), "its registry could not be reached"],
    ["anything else, masked", engine("unexpected EOF from 192.168.1.9:443"), "unexpected EOF from <address>"],
  ])("gpu-node executors - pull failure reason: %s", (_name, err, expected) => {
    expect(pullFailureReason(err)).toBe(expected);
  });
});

describe("gpu-node executors - process environment", () => {
  test("gpu-node executors - only a minimal env, with the card in CUDA_VISIBLE_DEVICES", () => {
    const env = processJobEnv(real, "/tmp/job", { NVIDIA_VISIBLE_DEVICES: "all", NVIDIA_DRIVER_CAPABILITIES: "all" });
    expect(Object.keys(env).sort()).toEqual(["CUDA_VISIBLE_DEVICES", "HOME", "LANG", "PATH", "TMPDIR"]);
    expect(env.CUDA_VISIBLE_DEVICES).toBe(real.uuid);
    expect(env.HOME).toBe("/tmp/job");
  });

  test("gpu-node executors - NVIDIA_* variables are stripped whatever their case", () => {
    expect(withoutNvidiaVariables({ NVIDIA_VISIBLE_DEVICES: "all", nvidia_require_cuda: "x", FOO: "1" })).toEqual({ FOO: "1" });
  });
});

describe("gpu-node executors - event outbox", () => {
  test("gpu-node executors - events are published in order, retried until they go through", async () => {
    const published: string[] = [];
    let failuresLeft = 3;
    const retries: number[] = [];
    const outbox = new EventOutbox<string>({
      publish: async (event) => {
        if (event === "b" && failuresLeft-- > 0) throw new Error("NATS 503");
        published.push(event);
      },
      backoffMs: () => 1,
      onRetry: (_err, attempt) => retries.push(attempt),
    });
    for (const e of ["a", "b", "c", "d"]) outbox.push(e);
    expect(await outbox.flush(2000)).toBe(true);
    expect(published).toEqual(["a", "b", "c", "d"]);
    expect(retries).toEqual([1, 2, 3]);
    expect(outbox.pending).toBe(0);
  });

  test("gpu-node executors - close hands back what was never delivered, in order", async () => {
    const outbox = new EventOutbox<string>({
      publish: async () => {
        throw new Error("down");
      },
      backoffMs: () => 10_000,
    });
    outbox.push("started");
    outbox.push("finished");
    expect(await outbox.flush(30)).toBe(false);
    expect(outbox.close()).toEqual(["started", "finished"]);
    expect(() => outbox.push("late")).toThrow(/closed/);
  });
});
