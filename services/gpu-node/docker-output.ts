/**
 * Output of Docker jobs: the node attaches to each container before it starts and copies the
 * multiplexed stream into the job's capture (Docker's own json-file log is capped and lossy, so
 * it is only the fallback for what a job printed while no node was attached).
 */
import type Docker from "dockerode";
import { DockerFrameDemuxer, OutputCapture } from "./output";

/** Copies an attached container's output into the job's capture; resolves when the stream ends. */
export function captureStream(stream: NodeJS.ReadableStream, output: OutputCapture): Promise<void> {
  const demux = new DockerFrameDemuxer((payload) => output.append(payload));
  return new Promise((resolve) => {
    stream.on("data", (chunk: Buffer) => {
      demux.push(chunk);
      if (output.congested) {
        stream.pause(); // the container blocks on its stdout meanwhile
        output.whenDrained(() => stream.resume());
      }
    });
    stream.resume();
    stream.once("end", () => resolve());
    stream.once("close", () => resolve());
    stream.once("error", () => resolve());
  });
}

export const attachOptions = { stream: true, stdout: true, stderr: true, logs: false } as const;

/**
 * What an adopted job printed while no node watched, from the engine's own (bounded) log: the
 * entries stamped after the log's last write and before the new attach.
 */
export async function recoverGap(container: Docker.Container, output: OutputCapture, fromMs: number, toMs: number): Promise<void> {
  const raw = (await container.logs({ stdout: true, stderr: true, follow: false, timestamps: true, since: Math.floor(fromMs / 1000) })) as unknown as Buffer;
  let recovered = 0;
  new DockerFrameDemuxer((payload) => {
    const space = payload.indexOf(0x20);
    const at = Date.parse(payload.subarray(0, space).toString());
    if (!(at > fromMs && at < toMs)) return;
    output.append(payload.subarray(space + 1));
    recovered += payload.length - space - 1;
  }).push(Buffer.isBuffer(raw) ? raw : Buffer.from(String(raw)));
  output.note(`the GPU node was restarting; ${recovered} bytes printed meanwhile were recovered from the container engine's log (older ones may be missing)`);
}
