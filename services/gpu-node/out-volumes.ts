/**
 * The Docker volume holding each job's /out (where it leaves files to keep, artifacts.ts). A fresh
 * volume belongs to root, mode 755: the job (nobody) could not write to it, so before the job runs
 * it is made world-writable (sticky, as /tmp) through a helper container (the job's own has a
 * read-only root) and an archive call of the engine, tens of milliseconds in all: a few volumes
 * are prepared ahead, off the jobs' start path, and a job finding none waits for its own. Removed
 * after the job's archive is kept; what a crashed node left of them is removed when it comes back.
 */
import { randomBytes } from "crypto";
import type Docker from "dockerode";
import { PREPARED_OUT_MTIME_S, preparedOutTar } from "./artifacts";
import { LABEL_NAMESPACE, LABEL_NODE, LABEL_OUT_OF, OUT_PATH, OUT_VOLUME_PREFIX, outMount } from "./container-spec";
import { ignoreStatus } from "./docker-errors";
import { JOB_ID_PATTERN } from "./job";

/** Volumes prepared ahead of the jobs (labelled with their node: no other node removes them). */
const READY_PREFIX = `${OUT_VOLUME_PREFIX}ready-`;
/** How many wait prepared: jobs launched one after the other never wait for one. */
const READY_COUNT = 2;

export type VolumeOwner = { nodeId: string; namespace: string };

export class OutVolumes {
  private readonly ready: string[] = [];
  /** Being prepared: not yet held by a container, and not a leftover either. */
  private readonly preparing = new Set<string>();
  private refilling?: Promise<void>;
  /** The node stops: nothing more is prepared ahead. */
  private released = false;

  constructor(
    private readonly docker: Docker,
    private readonly log: (message: string, err: unknown) => void = () => undefined,
  ) {}

  /** A volume prepared ahead, taken for one job; undefined when none is (then `prepare` the job's own). */
  async take(): Promise<string | undefined> {
    for (let name = this.ready.shift(); name; name = this.ready.shift()) {
      // Gone meanwhile (`docker volume prune`): a create would make it anew, unprepared.
      const there = await this.docker
        .getVolume(name)
        .inspect()
        .then(() => true, ignoreStatus(404));
      if (there) return name;
    }
    return undefined;
  }

  /**
   * Prepares the volume `name` (made now if it does not exist) through a helper container of
   * `image` (present: a job was just created from it), created and removed, never started.
   */
  async prepare(name: string, image: string, owner: VolumeOwner): Promise<void> {
    const helper = await this.docker.createContainer({
      Image: image,
      Entrypoint: ["/ci-platform-never-started"],
      // Not a job: never adopted; its node removes it after a crash (removeLeftovers).
      Labels: { [LABEL_NAMESPACE]: owner.namespace, [LABEL_NODE]: owner.nodeId, [LABEL_OUT_OF]: name },
      NetworkDisabled: true,
      HostConfig: { NetworkMode: "none", Mounts: [outMount(name)] },
    });
    try {
      await helper.putArchive(preparedOutTar(), { path: "/" });
    } finally {
      // Gone before the volume is handed on: a volume in use cannot be removed.
      await helper.remove({ force: true }).catch(ignoreStatus(404, 409));
    }
  }

  /** Resolves once no volume is being prepared ahead (the tests and the bench wait for it). */
  async settled(): Promise<void> {
    await this.refilling;
  }

  /** Prepares volumes ahead, in the background, until READY_COUNT wait. */
  refill(image: string, owner: VolumeOwner): void {
    if (this.refilling || this.released) return;
    this.refilling = (async () => {
      while (this.ready.length < READY_COUNT && !this.released) this.ready.push(await this.prepareAhead(image, owner));
    })()
      .catch((err) => this.log("Preparing an /out volume ahead failed (jobs prepare their own meanwhile)", err))
      .finally(() => (this.refilling = undefined));
  }

  private async prepareAhead(image: string, owner: VolumeOwner): Promise<string> {
    const name = `${READY_PREFIX}${randomBytes(8).toString("hex")}`;
    this.preparing.add(name);
    try {
      // Labelled with its node: another node's removeLeftovers leaves it alone.
      await this.docker.createVolume({ Name: name, Labels: { [LABEL_NAMESPACE]: owner.namespace, [LABEL_NODE]: owner.nodeId } });
      await this.prepare(name, image, owner);
      // Removed before the helper took it, the helper's create made it anew, unlabelled: no node would ever remove it.
      const info = await this.docker.getVolume(name).inspect();
      if (info.Labels?.[LABEL_NODE] !== owner.nodeId) throw new Error(`The /out volume ${name} was removed while it was being prepared`);
      return name;
    } catch (err) {
      await this.remove(name).catch(() => undefined);
      throw err;
    } finally {
      this.preparing.delete(name);
    }
  }

  /**
   * Whether the stopped container's /out is exactly as prepared (nothing to archive): its time is
   * still the prepared one. false when it cannot tell (a volume prepared before the mark, no /out).
   */
  async untouched(container: Docker.Container): Promise<boolean> {
    try {
      // The engine's answer is a stream (a HEAD, so without a body): read to its end, or its socket
      // stays open for good (one leaked connection per Docker job, and a test process never exits).
      const response = (await container.infoArchive({ path: OUT_PATH })) as NodeJS.ReadableStream & { headers?: Record<string, string | undefined> };
      response.resume();
      const stat = JSON.parse(Buffer.from(response.headers?.["x-docker-container-path-stat"] ?? "", "base64").toString()) as { mtime?: string };
      return Date.parse(stat.mtime ?? "") === PREPARED_OUT_MTIME_S * 1000;
    } catch {
      return false;
    }
  }

  /** The node stops: the volumes prepared ahead are removed (no job will take them). */
  async release(): Promise<void> {
    this.released = true;
    await this.refilling;
    await Promise.all(this.ready.splice(0).map((name) => this.remove(name)));
  }

  /** After the job: its /out volume. */
  async remove(name: string): Promise<void> {
    await this.docker.getVolume(name).remove().catch(ignoreStatus(404, 409));
  }

  /**
   * A node that crashed between the steps of preparing or of a job's cleanup leaves /out helper
   * containers (never started; no job needs one) and /out volumes no container uses: a job's own
   * (its container is removed only after its /out is archived, and holds the volume from its
   * creation on: without one it is garbage, whichever node or namespace made it) and those it
   * prepared ahead. Another node's helpers and prepared volumes on the same engine may be in use:
   * left alone.
   */
  async removeLeftovers(nodeId: string, namespace: string): Promise<void> {
    const helpers = await this.docker.listContainers({
      all: true,
      filters: { label: [LABEL_OUT_OF, `${LABEL_NAMESPACE}=${namespace}`, `${LABEL_NODE}=${nodeId}`] },
    });
    await Promise.all(helpers.map((h) => this.docker.getContainer(h.Id).remove({ force: true }).catch(ignoreStatus(404, 409))));
    const { Volumes } = await this.docker.listVolumes({ filters: { dangling: ["true"], name: [OUT_VOLUME_PREFIX] } });
    const mine = (v: Docker.VolumeInspectInfo) =>
      v.Labels?.[LABEL_NODE] === nodeId && v.Labels?.[LABEL_NAMESPACE] === namespace && !this.ready.includes(v.Name) && !this.preparing.has(v.Name);
    const unused = (Volumes ?? []).filter((v) =>
      v.Name.startsWith(READY_PREFIX) ? mine(v) : v.Name.startsWith(OUT_VOLUME_PREFIX) && JOB_ID_PATTERN.test(v.Name.slice(OUT_VOLUME_PREFIX.length)),
    );
    // 409: taken by a container created since the listing.
    await Promise.all(unused.map((v) => this.remove(v.Name)));
  }
}
