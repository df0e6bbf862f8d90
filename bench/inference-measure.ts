/**
 * bench:inference's measurement: requests to a path (a port, a URL path, headers, a body per
 * request), closed-loop at a given concurrency, and paths compared in alternating short rounds.
 */
import fs from "fs";
import http from "http";
import { procStatTicks } from "./lib/job-cost";

/**
 * `body(i)`: the i-th request of a pass; its prompt's `#i` fixes the stand-in's answer time, the same on every path.
 * `pid`: the process serving the path (a gateway's), whose CPU time per request is measured.
 */
export type Target = { name: string; port: number; path: string; headers: Record<string, string>; body: (i: number, stream: boolean) => string; pid?: number };
/** `cpuUs`: CPU time (user + system) of the target's process per request, µs: what the load on the machine moves least. */
export type Figures = { p50: number; p99: number; rps: number; cpuUs?: number } | { error: string };

const TICK_US = 10_000; // /proc's clock ticks (USER_HZ 100)

/** CPU time (user + system, all threads) of a process so far, µs; undefined where /proc cannot tell. */
export function cpuTimeUs(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    return procStatTicks(fs.readFileSync(`/proc/${pid}/stat`, "utf8")).self * TICK_US;
  } catch {
    return undefined;
  }
}

export const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

/** One request; resolves with ms until the whole body (or, with `firstByte`, its first byte). */
export function once(t: Target, stream: boolean, i = 0): Promise<number> {
  const body = t.body(i, stream);
  return new Promise((resolve, reject) => {
    const started = process.hrtime.bigint();
    const headers = { ...t.headers, "content-type": "application/json", "content-length": Buffer.byteLength(body) };
    const req = http.request({ host: "127.0.0.1", port: t.port, path: t.path, method: "POST", agent, headers });
    req.once("error", reject);
    req.once("response", (res) => {
      let first: bigint | undefined;
      let text = "";
      res.on("data", (d) => {
        first ??= process.hrtime.bigint();
        if (res.statusCode !== 200) text += d;
      });
      res.once("end", () => {
        if (res.statusCode !== 200) return reject(new Error(`${res.statusCode} ${text.slice(0, 200)}`));
        resolve(Number((stream ? first! : process.hrtime.bigint()) - started) / 1e6);
      });
      res.once("error", reject);
    });
    req.end(body);
  });
}

export type Run = { samples: number[]; seconds: number; cpuUs?: number } | { error: string };

/** `total` requests, `concurrency` at a time (closed loop), numbered from `first`. */
async function run(t: Target, total: number, concurrency: number, stream: boolean, first = 0): Promise<Run> {
  const samples: number[] = [];
  let next = 0;
  const cpuBefore = cpuTimeUs(t.pid);
  const started = process.hrtime.bigint();
  try {
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next < total) samples.push(await once(t, stream, first + next++));
      }),
    );
  } catch (err) {
    return { error: (err as Error).message };
  }
  const cpuAfter = cpuTimeUs(t.pid);
  const cpuUs = cpuBefore === undefined || cpuAfter === undefined ? undefined : cpuAfter - cpuBefore;
  return { samples, seconds: Number(process.hrtime.bigint() - started) / 1e9, cpuUs };
}

/** Percentiles over every sample of a path's runs. */
export function figuresOf(runs: Run[]): Figures {
  const failed = runs.find((r) => "error" in r);
  if (failed) return failed as { error: string };
  const ok = runs as Array<{ samples: number[]; seconds: number; cpuUs?: number }>;
  const samples = ok.flatMap((r) => r.samples).sort((a, b) => a - b);
  const seconds = ok.reduce((sum, r) => sum + r.seconds, 0);
  const at = (q: number) => samples[Math.min(samples.length - 1, Math.floor(q * samples.length))];
  const cpu = ok.every((r) => r.cpuUs !== undefined) ? ok.reduce((sum, r) => sum + r.cpuUs!, 0) : undefined;
  return { p50: at(0.5), p99: at(0.99), rps: Math.round(samples.length / seconds), ...(cpu === undefined ? {} : { cpuUs: Math.round(cpu / samples.length) }) };
}

/**
 * Every path warmed up, then the requests in many short rounds, path after path (10 requests per
 * round at concurrency 1): load from outside the benchmark, which comes in bursts on a shared
 * machine, falls on every path alike instead of on whichever ran during the burst.
 */
export async function compare(targets: Target[], total: number, concurrency: number, stream: boolean): Promise<Figures[]> {
  for (const t of targets) await run(t, Math.min(100, total), concurrency, stream); // JIT, pools, model list cache
  const rounds = concurrency === 1 ? Math.ceil(total / 10) : 8;
  const per = Math.ceil(total / rounds);
  const runs: Run[][] = targets.map(() => []);
  for (let r = 0; r < rounds; r++)
    for (const [i, t] of targets.entries()) {
      // A path that failed is not asked again (Portkey's streams).
      if (!runs[i].some((x) => "error" in x)) runs[i].push(await run(t, per, concurrency, stream, r * per));
    }
  return runs.map(figuresOf);
}
