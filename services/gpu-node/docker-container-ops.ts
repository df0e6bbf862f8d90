/**
 * Watching a job's container, once created (a new one) or found again after a restart (an adopted
 * one): its output, its exit (and whether memory killed it), its stop, and its removal together
 * with its /out volume, whose files are kept as the job's artifacts first.
 */
import type Docker from "dockerode";
import type { Readable } from "stream";
import { JobError, JobLimits, JobOps } from "./job";
import { attachOptions, captureStream, recoverGap } from "./docker-output";
import { outOfMemory } from "./cgroups";
import { keepArtifacts, storeArchive } from "./artifacts";
import type { OutVolumes } from "./out-volumes";
import type { OutputCapture } from "./output";
import { OUT_PATH } from "./container-spec";
import { ignoreStatus } from "./docker-errors";

/** The container to watch and what the executor lends for it. */
export interface WatchedContainer {
  container: Docker.Container;
  jobId: string;
  /** Found in state "created" after a restart: it never ran, and the job fails with the reason. */
  neverStarted: boolean;
  /** Its /out volume (a container from before /out has none). */
  outVolume: string | undefined;
  outVolumes: OutVolumes;
  limits: () => JobLimits;
  /** The stream attached before start; absent for an adopted one, which attaches anew. */
  attached?: NodeJS.ReadableStream;
  /** Whether it still runs (an exited one has nothing live to attach to). */
  running?: boolean;
}

/**
 * Watching a container: its output (the stream attached before start, or for an adopted one a
 * new attach plus what the engine logged meanwhile), its exit, stop and removal.
 */
export function containerOps({ container, jobId, neverStarted, outVolume, outVolumes, limits, attached, running = true }: WatchedContainer): JobOps {
  let stream: NodeJS.ReadableStream | undefined = attached;
  let logsDone: Promise<void> = Promise.resolve();
  let capture: OutputCapture | undefined;
  // Kept from the stopped container's /out volume (artifacts.ts); a container from before /out has none (404).
  const keepOut = () =>
    keepArtifacts(jobId, limits(), capture, async (dest, maxBytes) => {
      const archive = await container.getArchive({ path: OUT_PATH }).catch(ignoreStatus(404));
      return archive ? storeArchive(archive as Readable, dest, maxBytes) : undefined;
    });
  let failure: string | undefined;
  /** /out as prepared: nothing to archive (the archive call costs tens of ms; the look, a few). */
  let outUntouched = false;
  return {
    async launch(output) {
      capture = output;
      if (neverStarted) throw new JobError("The GPU node stopped before the job's container started");
      if (!stream) {
        const attachedAt = Date.now();
        // An exited container has nothing live to attach to (and its attach would not end).
        if (running) stream = await container.attach(attachOptions).catch(() => undefined);
        stream?.pause(); // the gap goes first
        await recoverGap(container, output, output.lastWriteMs, attachedAt).catch(() =>
          output.note("the GPU node was restarting; output printed meanwhile may be missing"),
        );
      }
      if (stream) logsDone = captureStream(stream, output);
    },
    async exited() {
      const result = (await container.wait()) as { StatusCode: number };
      // Killed for memory, it exits 137 like any SIGKILL: only the engine's state tells the two apart.
      const [info, untouched] = await Promise.all([container.inspect().catch(() => undefined), outVolume ? outVolumes.untouched(container) : false]);
      if (info?.State.OOMKilled) failure = outOfMemory({ memoryBytes: info.HostConfig.Memory ?? 0 });
      outUntouched = untouched;
      return result.StatusCode;
    },
    failure: () => failure,
    async kill(graceS: number) {
      // 304: already stopped; 404: already gone.
      await container.stop({ t: Math.ceil(graceS) }).catch(ignoreStatus(304, 404));
    },
    async cleanup() {
      const bounded = new Promise<void>((resolve) => setTimeout(resolve, 5000).unref());
      await Promise.race([logsDone, bounded]);
      (stream as { destroy?: () => void } | undefined)?.destroy?.();
      // Before the removal: the archive is read from the stopped container's /out volume.
      if (!outUntouched) await keepOut();
      await container.remove({ force: true }).catch(ignoreStatus(404, 409));
      if (outVolume) await outVolumes.remove(outVolume);
    },
    detach() {
      (stream as { destroy?: () => void } | undefined)?.destroy?.();
    },
  };
}
