/** Docker clean-up shared by the tests and benches that run job containers. */
import type Docker from "dockerode";
import type { NodeCard } from "../../services/gpu-node/discovery";
import { type ContainerContext, DockerExecutor, LABEL_NAMESPACE } from "../../services/gpu-node/docker-executor";
import type { JobExecutor, JobLimits } from "../../services/gpu-node/job";
import type { RelayHost } from "../../services/gpu-node/platform-access";
import { ProcessExecutor } from "../../services/gpu-node/process-executor";
import { testSandbox } from "./sandbox";

/** The job image `.ci/setup.d/20-docker.sh` builds locally (no registry). */
export const TEST_JOB_IMAGE = process.env.TEST_JOB_IMAGE || "ci-platform/test-busybox:latest";

/** Never skipped: without an engine or the image, a Docker test fails, as it does in CI. */
export async function requireEngineAndImage(docker: Docker): Promise<void> {
  await docker.ping();
  await docker.getImage(TEST_JOB_IMAGE).inspect();
}

/** A simulated card (no device is requested for it, so no NVIDIA runtime is needed). */
export const simulatedCard = (uuid: string): NodeCard => ({
  uuid,
  index: 0,
  name: "Test GPU",
  memoryTotal: 1024,
  memoryUsed: 0,
  utilization: 0,
  temperature: 30,
  simulated: true,
});

/**
 * Removes every container of `namespace` (the executor labels each job container with it), running
 * or not, then the /out volumes its nodes prepared ahead (labelled with it too).
 */
export async function removeContainersOf(docker: Docker, namespace: string): Promise<void> {
  const left = await docker.listContainers({ all: true, filters: { label: [`${LABEL_NAMESPACE}=${namespace}`] } });
  await Promise.all(
    left.map((c) =>
      docker
        .getContainer(c.Id)
        .remove({ force: true })
        .catch(() => undefined),
    ),
  );
  const { Volumes } = await docker.listVolumes({ filters: { label: [`${LABEL_NAMESPACE}=${namespace}`] } });
  await Promise.all(
    (Volumes ?? []).map((v) =>
      docker
        .getVolume(v.Name)
        .remove()
        .catch(() => undefined),
    ),
  );
}

/** Whether the engine has a volume of that name. */
export const volumeExists = (docker: Docker, name: string): Promise<boolean> =>
  docker
    .getVolume(name)
    .inspect()
    .then(
      () => true,
      () => false,
    );

/**
 * The executor of a relay test (platform access, a deployment's serve relay): sandboxed processes,
 * or Docker containers without a network of `image` under `namespace`, with the node's `relay`.
 */
export function relayTestExecutor(
  mode: "sandboxed" | "docker",
  opts: { limits: () => JobLimits; relay?: RelayHost; namespace: string; image: string; nodeId: string; docker: Docker },
): JobExecutor {
  if (mode === "sandboxed") return new ProcessExecutor(opts.limits, testSandbox(), opts.relay);
  const context: ContainerContext = {
    nodeId: opts.nodeId,
    namespace: opts.namespace,
    defaultImage: opts.image,
    limits: { memoryMb: 512, cpus: 1, pids: 512, network: "none" },
    allowedRegistries: ["docker.io"],
  };
  return new DockerExecutor(opts.docker, () => context, opts.limits, opts.relay);
}
