/**
 * Which of a node's announced cards take jobs (pure). A gpu-node says what cards it has; a
 * compromised host could claim any. Two bounds, both decided here:
 * - pinning: the cards a node announced first (or an administrator accepted since) are its
 *   accepted cards; an announced card that differs from them (a new uuid, or another name or memory
 *   size) is `pending` until accepted (POST /api/admin/nodes/:nodeId/cards/accept);
 * - GPU_NODE_CARDS: the operator's per-node allowance of card types and counts; accepted cards
 *   beyond it are `not-allowed`, whatever an administrator accepted (a card whose name matches
 *   several allowances takes a slot of each).
 */
import type { GpuCard } from "../../../lib/gpu-protocol";
import { SettingError } from "../../../lib/settings";
import { matchesGpuType } from "./gpu-type";

/** What a card is pinned by: its identity and the two facts a scheduler places on. */
export type PinnedCard = { uuid: string; name: string; memoryTotal: number };
/** Up to `count` cards whose name matches `type` (gpuType's rule: case-insensitive, part of the name). */
export type CardAllowance = { type: string; count: number };
/** GPU_NODE_CARDS: node id → its allowances; `*` for every node not named; a node in neither is unbounded. */
export type NodeCardLimits = ReadonlyMap<string, readonly CardAllowance[]>;
export type HeldReason = "pending" | "not-allowed";
export type HeldCard = GpuCard & { reason: HeldReason };
export type CardStanding = { usable: GpuCard[]; held: HeldCard[] };

export const ANY_NODE = "*";
/** A node may hold at most this many cards of one allowance (the most a job asks for is 16; hosts hold fewer). */
const MAX_ALLOWED = 1024;
const NODE_ID = /^[A-Za-z0-9_.-]{1,200}$/;

export const pinOf = (card: PinnedCard): PinnedCard => ({ uuid: card.uuid, name: card.name, memoryTotal: card.memoryTotal });

/** Whether `card` is the pinned card of its uuid, unchanged. */
export function matchesPin(card: PinnedCard, pins: ReadonlyMap<string, PinnedCard>): boolean {
  const pin = pins.get(card.uuid);
  return pin !== undefined && pin.name === card.name && pin.memoryTotal === card.memoryTotal;
}

/**
 * The standing of each announced card: `pins` null means no pinning (every card accepted), an empty
 * map a node with nothing accepted yet. Allowances are spent in card index order by accepted cards
 * only, so a pending card never displaces an accepted one. A uuid announced again (a later index)
 * is `not-allowed`.
 */
export function cardStanding(
  cards: readonly GpuCard[],
  pins: ReadonlyMap<string, PinnedCard> | null,
  allowance: readonly CardAllowance[] | undefined,
): CardStanding {
  const left = allowance?.map((a) => ({ ...a }));
  const usable: GpuCard[] = [];
  const held: HeldCard[] = [];
  const seen = new Set<string>();
  for (const card of [...cards].sort((a, b) => a.index - b.index)) {
    // One uuid is one card: its repeats would let one card count (and be placed on) several times.
    if (seen.has(card.uuid)) {
      held.push({ ...card, reason: "not-allowed" });
      continue;
    }
    seen.add(card.uuid);
    if (pins && !matchesPin(card, pins)) {
      held.push({ ...card, reason: "pending" });
      continue;
    }
    // Every allowance the name matches is spent, so no type ever has more cards than its count.
    const slots = left?.filter((a) => matchesGpuType(card.name, a.type));
    if (slots && (!slots.length || slots.some((a) => a.count === 0))) {
      held.push({ ...card, reason: "not-allowed" });
      continue;
    }
    slots?.forEach((a) => a.count--);
    usable.push(card);
  }
  return { usable, held };
}

/** The allowances of `nodeId` (its own, else `*`'s; undefined: no bound). */
export const allowanceOf = (limits: NodeCardLimits, nodeId: string): readonly CardAllowance[] | undefined => limits.get(nodeId) ?? limits.get(ANY_NODE);

/**
 * Parses GPU_NODE_CARDS: `<nodeId>=<type>:<count>,<type>:<count>;<nodeId>=…`, e.g.
 * `gpu-node.a=H100:8;gpu-node.b=A100:4,RTX 3060:1;*=RTX 3060:2`. `<nodeId>=` with nothing after
 * it allows that node no card. Unset or empty: no bound.
 */
export function parseNodeCards(raw: string | undefined): Map<string, CardAllowance[]> {
  const limits = new Map<string, CardAllowance[]>();
  if (raw === undefined || raw.trim() === "") return limits;
  const bad = (why: string): never => {
    throw new SettingError("GPU_NODE_CARDS", raw, `<nodeId>=<type>:<count>,…;… (${why})`);
  };
  for (const entry of raw.split(";").map((e) => e.trim())) {
    if (!entry) continue;
    const eq = entry.indexOf("=");
    if (eq < 0) bad(`"${entry}" has no "="`);
    const nodeId = entry.slice(0, eq).trim();
    if (nodeId !== ANY_NODE && !NODE_ID.test(nodeId)) bad(`"${nodeId}" is not a node id`);
    if (limits.has(nodeId)) bad(`"${nodeId}" is named twice`);
    const parts = entry
      .slice(eq + 1)
      .split(",")
      .map((p) => p.trim())
      .filter(Boolean);
    limits.set(
      nodeId,
      parts.map((part) => {
        const match = /^([^:,;=]*[^:,;=\s])\s*:\s*(\d+)$/.exec(part);
        if (!match) bad(`"${part}" is not <type>:<count>`);
        const count = Number(match![2]);
        if (count < 1 || count > MAX_ALLOWED) bad(`the count of "${part}" is not between 1 and ${MAX_ALLOWED}`);
        return { type: match![1].trim(), count };
      }),
    );
  }
  return limits;
}
