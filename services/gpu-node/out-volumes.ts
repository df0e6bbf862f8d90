/**
 * The Docker volume holding each job's /out (where it leaves files to keep, artifacts.ts): made
 * writable for the job before it starts, removed after its archive is kept, and what a crashed
 * node left of them removed when it comes back.
 */
import type Docker from "dockerode";
import { emptyOutTar } from "./artifacts";
import { LABEL_NAMESPACE, LABEL_NODE, LABEL_OUT_OF, OUT_PATH, OUT_VOLUME_PREFIX, outVolumeName } from "./container-spec";
import { ignoreStatus } from "./docker-errors";
import { JOB_ID_PATTERN } from "./job";

export class OutVolumes {
  /** Removals of /out helper containers still under way, by job id. */
  private readonly helpers = new Map<string, Promise<void>>();

  constructor(private readonly docker: Docker) {}

  /**
   * A fresh volume belongs to root, mode 755: the job (nobody) could not write to it. The job's
   * own container has a read-only root, so the volume's mode is set through a helper container
   * that is created and removed, never started.
   */
  async prepare(jobId: string, request: Docker.ContainerCreateOptions): Promise<void> {
    const helper = await this.docker.createContainer({
      Image: request.Image,
      Entrypoint: ["/ci-platform-never-started"],
      // Not a job: never adopted; its node removes it after a crash (removeLeftovers).
      Labels: { [LABEL_NAMESPACE]: request.Labels![LABEL_NAMESPACE], [LABEL_NODE]: request.Labels![LABEL_NODE], [LABEL_OUT_OF]: jobId },
      NetworkDisabled: true,
      HostConfig: { NetworkMode: "none", Mounts: [{ Type: "volume", Source: outVolumeName(jobId), Target: OUT_PATH }] },
    });
    // Removed off the job's start path; remove waits for it (a volume in use cannot go).
    const removeHelper = () => {
      const removal = helper.remove({ force: true }).then(() => undefined, ignoreStatus(404, 409));
      this.helpers.set(
        jobId,
        removal.finally(() => this.helpers.delete(jobId)),
      );
    };
    try {
      await helper.putArchive(emptyOutTar(), { path: "/" });
    } finally {
      removeHelper();
    }
  }

  /** After the job: its /out volume (once its helper is gone: a volume in use cannot go). */
  async remove(jobId: string): Promise<void> {
    await this.helpers.get(jobId)?.catch(() => undefined);
    await this.docker.getVolume(outVolumeName(jobId)).remove().catch(ignoreStatus(404, 409));
  }

  /**
   * A node that crashed between the steps of prepare or of a job's cleanup leaves /out helper
   * containers (never started; no job needs one once its own container holds the volume) and /out
   * volumes no container uses (a job's container is removed only after its /out is archived, and
   * holds the volume from its creation on: a volume without one is garbage, whichever node or
   * namespace made it). Another node's helpers on the same engine may be in use: left alone.
   */
  async removeLeftovers(nodeId: string, namespace: string): Promise<void> {
    const helpers = await this.docker.listContainers({
      all: true,
      filters: { label: [LABEL_OUT_OF, `${LABEL_NAMESPACE}=${namespace}`, `${LABEL_NODE}=${nodeId}`] },
    });
    await Promise.all(helpers.map((h) => this.docker.getContainer(h.Id).remove({ force: true }).catch(ignoreStatus(404, 409))));
    const { Volumes } = await this.docker.listVolumes({ filters: { dangling: ["true"], name: [OUT_VOLUME_PREFIX] } });
    const unused = (Volumes ?? []).filter((v) => v.Name.startsWith(OUT_VOLUME_PREFIX) && JOB_ID_PATTERN.test(v.Name.slice(OUT_VOLUME_PREFIX.length)));
    // 409: taken by a container created since the listing.
    await Promise.all(unused.map((v) => this.docker.getVolume(v.Name).remove().catch(ignoreStatus(404, 409))));
  }
}
