/**
 * What operators see of the gpu-nodes (GET /api/admin/nodes), decided from this replica's view,
 * the stored drains and losses, the jobs each node holds and the cards held. Pure: inputs in, list out.
 * A node heard now is `draining` when drained, else `ready`; one not heard is `lost` once the
 * scheduler declared it so (listed until it comes back), or `draining` while this replica has not
 * heard it yet.
 */
import type { NodeEntry } from "../core/cluster-view";
import type { AdminNodeView, NodeState } from "../admin-contract";
import type { NodeRow } from "../store/nodes.repository";
import type { NodeLabeler } from "./job-view";
import type { HeldReason } from "../core/node-cards";
import type { GpuCard } from "../../../lib/gpu-protocol";

const iso = (d: Date | null | undefined) => d?.toISOString() ?? null;

/** The node's held-back cards for one reason, by index, as announced (without the reason). */
const heldOf = (node: NodeEntry | undefined, reason: HeldReason): GpuCard[] =>
  (node?.held ?? [])
    .filter((c) => c.reason === reason)
    .sort((a, b) => a.index - b.index)
    .map(({ reason: _reason, ...card }) => card);

export function nodeState(heard: boolean, row: NodeRow | undefined): NodeState | undefined {
  if (row?.draining) return heard || !row.lost_at ? "draining" : "lost";
  if (heard) return "ready";
  return row?.lost_at ? "lost" : undefined;
}

export function adminNodes(
  heard: readonly NodeEntry[],
  rows: readonly NodeRow[],
  running: ReadonlyMap<string, readonly string[]>,
  held: ReadonlySet<string>,
  label: NodeLabeler,
): AdminNodeView[] {
  const stored = new Map(rows.map((r) => [r.node_id, r]));
  const live = new Map(heard.map((n) => [n.nodeId, n]));
  const ids = [...new Set([...live.keys(), ...stored.keys()])].sort();
  const out: AdminNodeView[] = [];
  for (const id of ids) {
    const node = live.get(id);
    const row = stored.get(id);
    const state = nodeState(node !== undefined, row);
    if (!state) continue; // a row left by a resume of a node that was never lost nor is heard: nothing to show
    const jobs = running.get(id) ?? [];
    out.push({
      id,
      label: label(id),
      state,
      cards: (node?.cards ?? [])
        .slice()
        .sort((a, b) => a.index - b.index)
        .map((c) => ({ ...c, busy: held.has(c.uuid) })),
      pendingCards: heldOf(node, "pending"),
      disallowedCards: heldOf(node, "not-allowed"),
      runningJobs: [...jobs],
      lastSeenAt: node ? new Date(node.lastSeenMs).toISOString() : null,
      drainedAt: iso(row?.drained_at),
      drainedBy: row?.drained_by ?? null,
      lostAt: iso(row?.lost_at),
    });
  }
  return out;
}
