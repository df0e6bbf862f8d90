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
 * The engine stamps a line when its log driver gets it, the node's log file when the attached
 * stream delivered it: around the node's last write the two clocks disagree by milliseconds, so
 * lines stamped this close to it may or may not have been captured already.
 */
const BOUNDARY_MS = 500;

/**
 * What an adopted job printed while no node watched, from the engine's own (bounded) log: the
 * entries stamped after the log's last write and before the new attach. Of the entries stamped
 * near the last write, the longest run the captured output already ends with is skipped, so a
 * line is neither lost nor written twice.
 */
export async function recoverGap(container: Docker.Container, output: OutputCapture, fromMs: number, toMs: number): Promise<void> {
  const since = Math.floor((fromMs - BOUNDARY_MS) / 1000);
  const raw = (await container.logs({ stdout: true, stderr: true, follow: false, timestamps: true, since })) as unknown as Buffer;
  const entries: Buffer[] = [];
  let nearLastWrite = 0;
  new DockerFrameDemuxer((payload) => {
    const space = payload.indexOf(0x20);
    const at = Date.parse(payload.subarray(0, space).toString());
    if (!(at > fromMs - BOUNDARY_MS && at < toMs)) return;
    entries.push(payload.subarray(space + 1));
    if (at <= fromMs + BOUNDARY_MS) nearLastWrite = entries.length;
  }).push(Buffer.isBuffer(raw) ? raw : Buffer.from(String(raw)));
  let captured = 0;
  for (let n = 1; n <= nearLastWrite; n++) if (output.endsWith(Buffer.concat(entries.slice(0, n)))) captured = n;
  let recovered = 0;
  for (const entry of entries.slice(captured)) {
    output.append(entry);
    recovered += entry.length;
  }
  output.note(`the GPU node was restarting; ${recovered} bytes printed meanwhile were recovered from the container engine's log (older ones may be missing)`);
}
