/** Docker clean-up shared by the tests and benches that run job containers. */
import type Docker from "dockerode";
import { LABEL_NAMESPACE } from "../../services/gpu-node/docker-executor";

/** The job image `.ci/setup.d/20-docker.sh` builds locally (no registry). */
export const TEST_JOB_IMAGE = process.env.TEST_JOB_IMAGE || "ci-platform/test-busybox:latest";

/** Removes every container of `namespace` (the executor labels each job container with it), running or not. */
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
}
