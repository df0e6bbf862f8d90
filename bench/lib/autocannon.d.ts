declare module "autocannon" {
  type Histogram = { p50: number; p90: number; p99: number; average: number; max: number };
  export type Result = {
    requests: Histogram & { total: number; mean: number };
    latency: Histogram & { p97_5: number };
    non2xx: number;
    errors: number;
    timeouts: number;
    duration: number;
  };
  export type Options = {
    url: string;
    connections?: number;
    duration?: number;
    amount?: number;
    headers?: Record<string, string>;
    method?: string;
    body?: string;
  };
  function autocannon(opts: Options): Promise<Result>;
  export default autocannon;
}
