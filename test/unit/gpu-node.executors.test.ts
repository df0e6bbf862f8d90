/** Pure parts of the executors and the publish queue of job events: container requests, job env, retries. */
import type { NodeCard } from "../../services/gpu-node/discovery";
import {
  containerSpec,
  ContainerContext,
  dockerMessage,
  pullFailureReason,
  LABEL_GPU,
  LABEL_GPUS,
  LABEL_JOB,
  LABEL_NAMESPACE,
  LABEL_TIMEOUT,
  LABEL_NODE,
  outVolumeName,
} from "../../services/gpu-node/docker-executor";
import { mkdtempSync, rmSync } from "fs";
import os from "os";
import path from "path";
import { JobError, JobOps, RunningJob } from "../../services/gpu-node/job";
import { PublishQueue } from "../../lib/publish-queue";
import { processJobEnv, withoutNvidiaVariables } from "../../services/gpu-node/process-executor";
import { checkImage, DEFAULT_ALLOWED_REGISTRIES, isInternalAddress, parseAllowedRegistries, registryOf } from "../../lib/registry-policy";
import { planJobResources } from "../../services/gpu-node/resources";
import { gpuDeviceNodes, HostLayout, identityFiles, PRLIMIT, sandboxArgs, SandboxOptions } from "../../services/gpu-node/sandbox";
import { parseGpuInformation } from "../../services/gpu-node/discovery";

const simulated: NodeCard = { uuid: "GPU-sim-1", index: 0, name: "RTX", memoryTotal: 12288, memoryUsed: 0, utilization: 0, temperature: 30, simulated: true };
const real: NodeCard = { ...simulated, uuid: "GPU-2b9e4c7d-81a6-3f05-c7d2-5e0a91b4f368", simulated: false };
const context: ContainerContext = {
  nodeId: "node-7",
  namespace: "prod",
  defaultImage: "nvidia/cuda:12.4.1-base-ubuntu22.04",
  limits: { memoryMb: 2048, cpus: 1.5, pids: 256, network: "none" },
  allowedRegistries: ["docker.io"],
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
    // No host path: the job's own volume at /out, which outlives the exit so /out can be archived;
    // never filled from the image's own /out (only what the job leaves is kept).
    expect(host.Mounts).toEqual([{ Type: "volume", Source: outVolumeName("job-1"), Target: "/out", VolumeOptions: { NoCopy: true } }]);
    expect(host.PidsLimit).toBe(256);
    expect(host.Memory).toBe(2048 * 1024 * 1024);
    expect(host.MemorySwap).toBe(host.Memory);
    expect(host.NanoCpus).toBe(1.5e9);
    expect(host.AutoRemove).toBe(false);
    expect(Object.keys(host.Tmpfs ?? {})).toEqual(["/tmp"]);
    expect(host.ShmSize).toBe(1024 * 1024 * 1024); // GPU_JOB_SHM_MB's default
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

  const real2: NodeCard = { ...real, uuid: "GPU-7f3a2b10-0c4d-4e8f-9a61-2d5b7c9e0f13", index: 1 };
  const real3: NodeCard = { ...real, uuid: "GPU-0d9c1e2f-3a4b-4c5d-8e6f-7a8b9c0d1e2f", index: 2 };
  test.each([
    ["one real card: that one", [real], [real.uuid]],
    ["two real cards: both, in order", [real, real2], [real.uuid, real2.uuid]],
    ["three real cards: all three", [real, real2, real3], [real.uuid, real2.uuid, real3.uuid]],
    ["simulated cards: no device", [simulated, { ...simulated, uuid: "GPU-sim-2" }], []],
  ] as const)("gpu-node executors - device request of a multi-card job, %s", (_name, cards, uuids) => {
    const request = containerSpec({ jobId: "gang", card: cards[0], cards: [...cards], command: "true" }, context);
    expect(request.HostConfig!.DeviceRequests).toEqual(uuids.length ? [{ Driver: "nvidia", DeviceIDs: uuids, Capabilities: [["gpu"]] }] : []);
    const visible = request.Env!.filter((e) => e.startsWith("NVIDIA_VISIBLE_DEVICES="));
    expect(visible).toEqual(uuids.length ? [`NVIDIA_VISIBLE_DEVICES=${uuids.join(",")}`] : []);
    // A restarted node reads every card of the job back from its labels.
    expect(request.Labels![LABEL_GPU]).toBe(cards[0].uuid);
    expect(request.Labels![LABEL_GPUS]).toBe(cards.length > 1 ? cards.map((c) => c.uuid).join(",") : undefined);
  });

  test("gpu-node executors - labels name the job, node, card and namespace", () => {
    expect(spec.Labels).toEqual({ [LABEL_JOB]: "job-1", [LABEL_NODE]: "node-7", [LABEL_GPU]: real.uuid, [LABEL_NAMESPACE]: "prod" });
    // The job's own time limit, for the node that adopts the container after a restart.
    expect(containerSpec({ jobId: "j", card: real, command: "true", timeoutS: 90 }, context).Labels).toMatchObject({ [LABEL_TIMEOUT]: "90" });
  });

  test("gpu-node executors - an operator-allowed network is used as given", () => {
    const open = containerSpec({ jobId: "j", card: real, command: "true" }, { ...context, limits: { ...context.limits, network: "bridge" } });
    expect(open.HostConfig!.NetworkMode).toBe("bridge");
    expect(open.NetworkDisabled).toBe(false);
  });

  test.each([
    [
      "the engine's JSON message",
      Object.assign(new Error("(HTTP code 404) no such image - x"), { json: { message: "No such image: x:latest" } }),
      "No such image: x:latest",
    ],
    ["the HTTP prefix is dropped", new Error("(HTTP code 500) server error - pull access denied for x"), "pull access denied for x"],
    ["long text is bounded", new Error("y".repeat(1000)), `${"y".repeat(297)}...`],
    ["newlines become spaces", new Error("a\nb"), "a b"],
    [
      "addresses are masked",
      Object.assign(new Error("x"), { statusCode: 500, json: { message: "lookup r.io on 10.1.2.3:53: no such host" } }),
      "lookup r.io on <address>: no such host",
    ],
    [
      "a socket error says only that the engine did not answer",
      Object.assign(new Error("connect ENOENT /var/run/docker.sock"), { code: "ENOENT" }),
      "the container engine did not answer",
    ],
  ])("gpu-node executors - docker error message: %s", (_name, err, expected) => {
    expect(dockerMessage(err)).toBe(expected);
  });

  const engine = (message: string) => Object.assign(new Error(message), { statusCode: 500, json: { message } });
  test.each([
    [
      "unknown repository",
      engine("pull access denied for nosuch/image, repository does not exist or may require 'docker login'"),
      "the image does not exist in its registry, or the registry requires credentials",
    ],
    [
      "unknown tag",
      engine("manifest for busybox:nope not found: manifest unknown: manifest unknown"),
      "the image does not exist in its registry, or the registry requires credentials",
    ],
    ["registry down", engine('Get "http://127.0.0.1:9/v2/": dial tcp 127.0.0.1:9: connect: connection refused'), "its registry could not be reached"],
    [
      "no DNS",
      engine('Get "https://registry-1.docker.io/v2/": dial tcp: lookup registry-1.docker.io on 10.0.0.2:53: no such host'),
      "its registry could not be reached",
    ],
    ["anything else: a fixed sentence", engine("unexpected EOF from 192.168.1.9:443"), "its registry did not serve it"],
    [
      "what a non-registry answered never shows",
      engine('Get "http://127.0.0.1:4222/v2/": net/http: HTTP/1.x transport connection broken: malformed HTTP response "INFO {\\"server_id\\":\\"N\\"}"'),
      "its registry did not serve it",
    ],
  ])("gpu-node executors - pull failure reason: %s", (_name, err, expected) => {
    expect(pullFailureReason(err)).toBe(expected);
  });
});

describe("gpu-node executors - process environment", () => {
  test("gpu-node executors - only a minimal env, with the card in CUDA_VISIBLE_DEVICES", () => {
    const env = processJobEnv([real], "/tmp/job", { NVIDIA_VISIBLE_DEVICES: "all", NVIDIA_DRIVER_CAPABILITIES: "all" });
    expect(Object.keys(env).sort()).toEqual(["CUDA_VISIBLE_DEVICES", "HOME", "LANG", "PATH", "TMPDIR"]);
    expect(env.CUDA_VISIBLE_DEVICES).toBe(real.uuid);
    expect(env.HOME).toBe("/tmp/job");
  });

  test("gpu-node executors - a multi-card job's process sees all its cards, comma-separated, in order", () => {
    const second = { ...real, uuid: "GPU-7f3a2b10-0c4d-4e8f-9a61-2d5b7c9e0f13" };
    expect(processJobEnv([real, second], "/tmp/job", { CUDA_VISIBLE_DEVICES: "0" }).CUDA_VISIBLE_DEVICES).toBe(`${real.uuid},${second.uuid}`);
  });

  test("gpu-node executors - the job's own variables are added (replacing PATH or HOME if it sets them); its card stays the platform's", () => {
    const env = processJobEnv([real], "/tmp/job", { TOKEN: "t  x", HOME: "/tmp/elsewhere", CUDA_VISIBLE_DEVICES: "all" });
    expect(env).toMatchObject({ TOKEN: "t  x", HOME: "/tmp/elsewhere", TMPDIR: "/tmp/job", CUDA_VISIBLE_DEVICES: real.uuid });
    const docker = containerSpec({ jobId: "j", card: real, command: "true", env: { TOKEN: "a=b", NVIDIA_VISIBLE_DEVICES: "all" } }, context);
    expect(docker.Env).toEqual(["HOME=/tmp", "TMPDIR=/tmp", "TOKEN=a=b", `NVIDIA_VISIBLE_DEVICES=${real.uuid}`]);
  });

  test("gpu-node executors - NVIDIA_* variables are stripped whatever their case", () => {
    expect(withoutNvidiaVariables({ NVIDIA_VISIBLE_DEVICES: "all", nvidia_require_cuda: "x", FOO: "1" })).toEqual({ FOO: "1" });
  });
});

describe("gpu-node executors - a job's start time", () => {
  let logDir: string;
  beforeEach(() => (logDir = mkdtempSync(path.join(os.tmpdir(), "job-start-"))));
  afterEach(() => rmSync(logDir, { recursive: true, force: true }));

  /** Ops whose launch (pull, create, start) ends when the test says so, or throws `launchError`. */
  const gatedOps = (launchError?: Error) => {
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const ops: JobOps = {
      launch: async () => {
        await gate;
        if (launchError) throw launchError;
      },
      exited: () => new Promise<number>(() => {}),
      kill: async () => {},
      cleanup: async () => {},
      detach: () => {},
    };
    return { ops, open };
  };

  test("gpu-node executors - a job's start time is when its launch ended (after any pull), not when the node took it", async () => {
    const { ops, open } = gatedOps();
    const job = new RunningJob("job-1", "GPU-1", ops, { timeoutS: 60, graceS: 1, logDir });
    await new Promise((resolve) => setImmediate(resolve));
    expect(job.startedAt).toBeUndefined(); // still launching (pulling its image)
    const launchEnds = Date.now();
    open();
    expect(await job.started).toBe(true);
    expect(job.startedAt!.getTime()).toBeGreaterThanOrEqual(launchEnds);
    job.detach();
  });

  test("gpu-node executors - a job that could not be launched has no start time", async () => {
    const { ops, open } = gatedOps(new JobError("Container image 'x' could not be pulled: its registry could not be reached"));
    const job = new RunningJob("job-2", "GPU-1", ops, { timeoutS: 60, graceS: 1, logDir });
    open();
    expect(await job.started).toBe(false);
    expect(await job.outcome).toMatchObject({ type: "failed", exitCode: null });
    expect(job.startedAt).toBeUndefined();
  });

  test("gpu-node executors - an adopted job keeps the start of its container, however late the node took it back", async () => {
    const { ops, open } = gatedOps();
    const before = Date.now();
    const job = new RunningJob("job-3", "GPU-1", ops, { timeoutS: 60, graceS: 1, logDir, adopted: true, elapsedMs: 90_000 });
    const after = Date.now();
    open();
    expect(await job.started).toBe(true);
    expect(job.startedAt!.getTime()).toBeGreaterThanOrEqual(before - 90_000);
    expect(job.startedAt!.getTime()).toBeLessThanOrEqual(after - 90_000);
    job.detach();
  });
});

describe("gpu-node executors - publish queue", () => {
  test("gpu-node executors - events are published in order, retried until they go through", async () => {
    const published: string[] = [];
    let failuresLeft = 3;
    const retries: number[] = [];
    const queue = new PublishQueue<string>({
      publish: async (event) => {
        if (event === "b" && failuresLeft-- > 0) throw new Error("NATS 503");
        published.push(event);
      },
      backoffMs: () => 1,
      onRetry: (_err, attempt) => retries.push(attempt),
    });
    for (const e of ["a", "b", "c", "d"]) queue.push(e);
    expect(await queue.flush(2000)).toBe(true);
    expect(published).toEqual(["a", "b", "c", "d"]);
    expect(retries).toEqual([1, 2, 3]);
    expect(queue.pending).toBe(0);
  });

  test("gpu-node executors - close hands back what was never delivered, in order", async () => {
    const queue = new PublishQueue<string>({
      publish: async () => {
        throw new Error("down");
      },
      backoffMs: () => 10_000,
    });
    queue.push("started");
    queue.push("finished");
    expect(await queue.flush(30)).toBe(false);
    expect(queue.close()).toEqual(["started", "finished"]);
    expect(() => queue.push("late")).toThrow(/closed/);
  });
});

describe("gpu-node executors - bubblewrap sandbox argv", () => {
  const layout: HostLayout = {
    symlinks: { "/bin": "usr/bin", "/lib": "usr/lib", "/lib64": "usr/lib64", "/sbin": "usr/sbin" },
    directories: ["/usr"],
    devices: ["/dev/nvidia3", "/dev/nvidiactl"],
  };
  const options: SandboxOptions = {
    layout,
    uid: 65534,
    gid: 65534,
    limits: { processes: 64, memoryBytes: 1 << 30, tmpBytes: 1 << 26 },
    etcDir: "/tmp/ci-etc-1",
    argv: ["/bin/sh", "-c", 'exec 2>&1; exec /bin/sh -c "$1"', "ci-job", "echo hi; cat /etc/shadow"],
  };
  const args = sandboxArgs(options);
  /** Each `--flag a b` triple as "--flag a b", so a table can ask for it. */
  const has = (...parts: string[]) => args.some((_, i) => parts.every((p, j) => args[i + j] === p));

  test.each([
    ["every namespace is new (user, PID, mount, network, IPC, UTS, cgroup)", ["--unshare-all"]],
    ["a user namespace for certain, and none nested inside it", ["--unshare-user", "--disable-userns"]],
    ["the sandbox dies with the node", ["--die-with-parent"]],
    ["a new session: no terminal to inject keystrokes into", ["--new-session"]],
    ["no capabilities", ["--cap-drop", "ALL"]],
    ["the job's own uid and gid", ["--uid", "65534", "--gid", "65534"]],
    ["/usr read-only", ["--ro-bind", "/usr", "/usr"]],
    ["merged-/usr symlinks mirrored", ["--symlink", "usr/bin", "/bin"]],
    ["a fresh /proc of its own PID namespace", ["--proc", "/proc"]],
    ["a minimal /dev", ["--dev", "/dev"]],
    ["its card's device node", ["--dev-bind", "/dev/nvidia3", "/dev/nvidia3"]],
    ["the driver's control node", ["--dev-bind", "/dev/nvidiactl", "/dev/nvidiactl"]],
    ["a bounded, world-writable tmpfs as /tmp", ["--perms", "1777", "--size", String(1 << 26), "--tmpfs", "/tmp"]],
    ["a bounded /dev/shm of the node's default size", ["--perms", "1777", "--size", String(1 << 30), "--tmpfs", "/dev/shm"]],
    ["the node's /etc of safe entries and minimal passwd, read-only, in one mount", ["--ro-bind", "/tmp/ci-etc-1", "/etc"]],
    ["cwd /tmp", ["--chdir", "/tmp"]],
    ["process and memory limits inside", [PRLIMIT, "--nproc=64", `--data=${1 << 30}`, "--core=0", "--"]],
  ])("gpu-node executors - sandbox: %s", (_name, parts) => {
    expect(has(...parts)).toBe(true);
  });

  test("gpu-node executors - sandbox: the job's own folder bound writable as /out, and no file over GPU_JOB_OUT_MAX_MB", () => {
    const withOut = sandboxArgs({ ...options, outDir: "/tmp/ci-job-1/out", fileMaxBytes: 1 << 20 });
    const at = (...parts: string[]) => withOut.some((_, i) => parts.every((p, j) => withOut[i + j] === p));
    expect(at("--bind", "/tmp/ci-job-1/out", "/out")).toBe(true);
    expect(at(PRLIMIT, "--nproc=64", `--data=${1 << 30}`, `--fsize=${1 << 20}`, "--core=0", "--")).toBe(true);
    expect(args).not.toContain("/out"); // no folder given: no /out
  });

  test.each([
    ["network", "--share-net"],
    ["the host's root", "/"],
    ["the whole /etc", "/etc"],
    ["/run (the Docker socket)", "/run"],
    ["/var", "/var"],
    ["/home", "/home"],
    ["/sys", "/sys"],
    ["the host's /dev", "--dev-bind /dev"],
    ["environment values as arguments (a command line is readable by every user of the host)", "--setenv"],
  ])("gpu-node executors - sandbox: never %s", (_name, forbidden) => {
    const [flagOrPath, path] = forbidden.split(" ");
    if (path) expect(has(flagOrPath, path)).toBe(false);
    else if (flagOrPath.startsWith("--")) expect(args).not.toContain(flagOrPath);
    else for (const flag of ["--bind", "--ro-bind", "--dev-bind"]) expect(has(flag, flagOrPath)).toBe(false);
  });

  test("gpu-node executors - sandbox: the job's argv comes last and untouched, after every option", () => {
    expect(args.slice(-options.argv.length)).toEqual(options.argv);
    expect(args.indexOf(PRLIMIT)).toBeGreaterThan(args.lastIndexOf("--chdir"));
  });

  test("gpu-node executors - sandbox: real directories are bound where the host has no symlink", () => {
    const plain = sandboxArgs({ ...options, layout: { ...layout, symlinks: {}, directories: ["/usr", "/bin", "/lib"] } });
    expect(plain.join(" ")).toContain("--ro-bind /bin /bin");
    expect(plain.join(" ")).not.toContain("/lib64");
  });

  test("gpu-node executors - device nodes of a card: its minor plus the driver's shared nodes", () => {
    expect(gpuDeviceNodes([2])).toEqual(["/dev/nvidia2", "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset"]);
    expect(parseGpuInformation("Model: \t NVIDIA H100\nGPU UUID: \t GPU-abc\nDevice Minor: \t 5\n")).toEqual({ uuid: "GPU-abc", minor: 5 });
    expect(parseGpuInformation("Model: x\n")).toBeNull();
  });

  test("gpu-node executors - the sandbox's passwd names root and the job's user only", () => {
    expect(identityFiles(65534, 65534)).toEqual({
      passwd: "root:x:0:0:root:/root:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/tmp:/bin/sh\n",
      group: "root:x:0:\nnogroup:x:65534:\n",
    });
  });
});

describe("gpu-node executors - image registry allow-list", () => {
  test.each([
    ["busybox", "docker.io"],
    ["library/busybox:1.36", "docker.io"],
    ["nvidia/cuda:12.4.1-base-ubuntu22.04", "docker.io"],
    ["ci-platform/test-busybox:latest", "docker.io"],
    ["docker.io/library/busybox", "docker.io"],
    ["index.docker.io/library/busybox", "docker.io"],
    ["nvcr.io/nvidia/pytorch:24.01-py3", "nvcr.io"],
    ["GHCR.IO/owner/image", "ghcr.io"],
    ["localhost/x", "localhost"],
    ["localhost:5000/x", "localhost:5000"],
    ["127.0.0.1:3811/probe:latest", "127.0.0.1:3811"],
    ["[::1]:5000/x", "[::1]:5000"],
    ["Intranet/x", "intranet"],
    ["busybox@sha256:abc", "docker.io"],
  ])("gpu-node executors - registry of %s is %s", (reference, registry) => {
    expect(registryOf(reference)).toBe(registry);
  });

  test.each([
    "127.0.0.1:3811/probe:latest",
    "127.0.0.1:4222/x:1",
    "localhost:5000/x",
    "localhost/x",
    "10.0.0.5/x",
    "172.16.3.4:5000/x",
    "192.168.1.10/x",
    "169.254.169.254/latest",
    "[::1]:5000/x",
    "[fd00::1]/x",
    "[fe80::1]:443/x",
    "0.0.0.0:80/x",
  ])("gpu-node executors - %s is refused as a loopback or private registry", (reference) => {
    const check = checkImage(reference, DEFAULT_ALLOWED_REGISTRIES);
    expect(check.ok).toBe(false);
    expect(!check.ok && check.reason).toMatch(/is a loopback or private address/);
  });

  test.each(["registry.example.com/x", "8.8.8.8/x", "docker.io.evil.com/x", "nvcr.io:444/x"])(
    "gpu-node executors - %s (not listed) is refused",
    (reference) => {
      const check = checkImage(reference, DEFAULT_ALLOWED_REGISTRIES);
      expect(check).toMatchObject({ ok: false, reason: expect.stringMatching(/is not one of the operator's allowed registries/) });
    },
  );

  test.each(["busybox", "nvidia/cuda:12.4.1-base-ubuntu22.04", "nvcr.io/nvidia/pytorch:24.01-py3", "ghcr.io/a/b:1", "quay.io/a/b"])(
    "gpu-node executors - %s from a default public registry is allowed",
    (reference) => {
      expect(checkImage(reference, DEFAULT_ALLOWED_REGISTRIES).ok).toBe(true);
    },
  );

  test("gpu-node executors - an operator may list a private registry, host and port exactly", () => {
    const allowed = parseAllowedRegistries(" registry.internal:5000 , 127.0.0.1:5001,Index.Docker.io ");
    expect(allowed).toEqual(["registry.internal:5000", "127.0.0.1:5001", "docker.io"]);
    expect(checkImage("registry.internal:5000/team/x:1", allowed).ok).toBe(true);
    expect(checkImage("127.0.0.1:5001/x", allowed).ok).toBe(true);
    expect(checkImage("127.0.0.1:5002/x", allowed).ok).toBe(false);
    expect(checkImage("registry.internal/x", allowed).ok).toBe(false);
    expect(checkImage("nvcr.io/x", allowed).ok).toBe(false); // the list replaces the defaults
    expect(parseAllowedRegistries(undefined)).toEqual(DEFAULT_ALLOWED_REGISTRIES);
  });

  test.each([
    ["127.0.0.1", true],
    ["10.255.0.1", true],
    ["172.31.255.255", true],
    ["172.32.0.1", false],
    ["192.168.0.1", true],
    ["169.254.1.1", true],
    ["100.64.0.1", true],
    ["8.8.8.8", false],
    ["::1", true],
    ["fc00::1", true],
    ["fe80::1", true],
    ["::ffff:127.0.0.1", true],
    ["2001:db8::1", false],
    ["example.com", false],
  ])("gpu-node executors - %s internal: %s", (address, internal) => {
    expect(isInternalAddress(address)).toBe(internal);
  });
});

describe("gpu-node executors - job resources from the host", () => {
  const host = { memoryMb: 23 * 1024, cpus: 16 };
  test.each([
    ["1 card: the default 8 GiB fits", 1, {}, { memoryMb: 8192, cpus: 16 }],
    ["4 cards on 23 GiB: a fair share of 75 %", 4, {}, { memoryMb: Math.floor((23 * 1024 * 0.75) / 4), cpus: 4 }],
    ["3 cards: CPUs split, two decimals", 3, {}, { memoryMb: Math.floor((23 * 1024 * 0.75) / 3), cpus: 5.33 }],
    ["explicit limits within the host are kept", 2, { memoryMb: 10_000, cpus: 8 }, { memoryMb: 10_000, cpus: 8 }],
  ])("gpu-node executors - %s", (_name, cards, configured, limits) => {
    expect(planJobResources(host, cards, configured, false)).toEqual({ ok: true, limits, warnings: [] });
  });

  test("gpu-node executors - 4 cards × 8 GiB on a 23 GiB host is refused, with numbers and the way out", () => {
    const plan = planJobResources(host, 4, { memoryMb: 8192 }, false);
    expect(plan).toEqual({
      ok: false,
      error:
        "Job limits overcommit this host: 4 card(s) × GPU_JOB_MEMORY_MB=8192 = 32768 MiB exceeds the host's 23552 MiB. Lower them, or set GPU_ALLOW_OVERCOMMIT=true",
    });
  });

  test("gpu-node executors - too many CPUs is refused; the operator may allow overcommit (with a warning)", () => {
    expect(planJobResources(host, 4, { cpus: 8 }, false)).toMatchObject({
      ok: false,
      error: expect.stringContaining("4 card(s) × GPU_JOB_CPUS=8 = 32 CPUs exceeds the host's 16"),
    });
    const allowed = planJobResources(host, 4, { cpus: 8, memoryMb: 8192 }, true);
    expect(allowed).toMatchObject({ ok: true, limits: { memoryMb: 8192, cpus: 8 } });
    expect(allowed.ok && allowed.warnings).toHaveLength(2);
  });
});
