/**
 * Before a process starts: every port it will listen on is free and no two are the same, or one
 * line naming the variable to change (a raw EADDRINUSE stack trace helps nobody).
 */
import net from "net";

export type PortClaim = { variable: string; port: number | null };

/** Whether `port` can be bound on `host` now (0 is always free). */
export function portFree(port: number, host?: string): Promise<boolean> {
  if (port === 0) return Promise.resolve(true);
  return new Promise((resolve) => {
    const probe = net.createServer();
    probe.once("error", () => resolve(false));
    probe.listen({ port, host, exclusive: true }, () => probe.close(() => resolve(true)));
  });
}

/** The first problem with `claims` as one line, or undefined when every port is free and distinct. */
export async function portProblem(claims: PortClaim[], host?: string, free = portFree): Promise<string | undefined> {
  const used = claims.filter((c): c is { variable: string; port: number } => c.port !== null && c.port !== 0);
  for (const [i, claim] of used.entries()) {
    const earlier = used.slice(0, i).find((c) => c.port === claim.port);
    if (earlier) return `${claim.variable}=${claim.port} is also ${earlier.variable}: set ${claim.variable} to another port (0: any free one, off: none)`;
  }
  for (const claim of used)
    if (!(await free(claim.port, host)))
      return `${claim.variable}=${claim.port} is in use by another program: set ${claim.variable} to a free port (0: any free one)`;
  return undefined;
}
