/** HTTP load with autocannon: requests/s and latency percentiles (ms) for one URL. */
import autocannon from "autocannon";

export type LoadFigures = { rps: number; p50: number; p99: number; non2xx: number; errors: number };

export async function load(
  url: string,
  opts: { headers?: Record<string, string>; connections?: number; durationS?: number; amount?: number; method?: string; body?: string } = {},
): Promise<LoadFigures> {
  const result = await autocannon({
    url,
    connections: opts.connections ?? 50,
    duration: opts.durationS ?? 5,
    // `amount`: a fixed number of requests instead of a duration (passes that write rows stay alike).
    ...(opts.amount !== undefined ? { amount: opts.amount } : {}),
    headers: opts.headers,
    method: opts.method ?? "GET",
    ...(opts.body !== undefined ? { body: opts.body } : {}),
  });
  return {
    rps: Math.round(result.requests.mean),
    p50: result.latency.p50,
    p99: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors + result.timeouts,
  };
}

export const ratio = (a: number, b: number) => (b > 0 ? `${((a / b) * 100).toFixed(0)} %` : "n/a");
