/**
 * Waiting for a deployment from the command line (`deployments create|get --wait`): its status and
 * replicas as a live line on a terminal, one plain line per change elsewhere, until it is ready,
 * failed, or idle with nothing to start; deployments are named by id or by name.
 */
import type { Deployment } from "../../sdk/src";
import { Context, UsageError } from "./context";
import { isTty, liveLine } from "./output";
import { forTerminal } from "./terminal";

const FULL_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** How often a wait reads the deployment again. */
const POLL_MS = 500;
/** What a wait allows beyond the deployment's own coldStartTimeoutSeconds (the controller's next round). */
const GRACE_S = 30;

/** A deployment id, or the id of the account's deployment of that name (the model name requests use). */
export async function resolveDeploymentId(ctx: Context, given: string): Promise<string> {
  if (FULL_ID.test(given)) return given;
  const { deployments } = await ctx.client().listDeployments();
  const named = deployments.find((d) => d.name === given);
  if (!named) throw new UsageError(`No deployment named "${given}" (ci-platform deployments ls)`);
  return named.id;
}

/** Where a wait ends: ready, failed, or idle with no replica to start (minReplicas 0: a request starts one). */
export const settled = (d: Deployment) => d.status === "ready" || d.status === "failed" || (d.status === "idle" && d.minReplicas === 0 && !d.replicas.desired);

/** `qwen idle · 0 ready, 1 starting, 1 desired · why`. */
export const progressText = (d: Deployment) =>
  [`${d.name} ${d.status}`, `${d.replicas.ready} ready, ${d.replicas.starting} starting, ${d.replicas.desired} desired`, d.statusReason ?? ""]
    .filter(Boolean)
    .join(" · ");

/**
 * Reads deployment `id` until it settles (see `settled`), showing its progress on stderr; a failed
 * deployment sets exit code 1 with its reason, as does one still not ready after its cold-start timeout.
 */
export async function waitForDeployment(ctx: Context, id: string): Promise<Deployment> {
  const sdk = ctx.client();
  const live = isTty(ctx.stderr) ? liveLine(ctx.stderr) : undefined;
  const began = Date.now();
  let shown = "";
  try {
    for (;;) {
      const d = await sdk.getDeployment(id);
      const text = progressText(d);
      const seconds = Math.floor((Date.now() - began) / 1000);
      if (live) live.update(`${text} · ${seconds} s`);
      else if (text !== shown) ctx.stderr.write(`${forTerminal(ctx.stderr, text)}\n`);
      shown = text;
      if (settled(d)) {
        if (d.status === "failed") process.exitCode = 1;
        return d;
      }
      if (seconds > d.coldStartTimeoutSeconds + GRACE_S) {
        process.exitCode = 1;
        ctx.stderr.write(`${d.name} not ready after ${seconds} s\n`);
        return d;
      }
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    }
  } finally {
    live?.done();
  }
}
