/** Repeated measurements of one figure, as benches print them: min / median / max. */

export const median = (values: number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

/** "min / median / max", each with `digits` decimals (none at 100 and above). */
export function spread(values: number[], digits = 2): string {
  const sorted = [...values].sort((a, b) => a - b);
  const f = (n: number) => (Math.abs(n) >= 100 ? n.toFixed(0) : n.toFixed(digits));
  return `${f(sorted[0])} / ${f(median(sorted))} / ${f(sorted[sorted.length - 1])}`;
}
