/**
 * Each node's accepted cards (node-cards.ts), kept in gpu_scheduler.node_cards so every replica
 * and every restart agrees, and cached by each replica: a heartbeat reads the database only when
 * this replica knows nothing of the node yet or the node announces a card its pins lack (so an
 * acceptance made on another replica is seen by the next heartbeat).
 */
import type { Pool } from "pg";
import type { GpuCard, NodeHeartbeat } from "../../../lib/gpu-protocol";
import { allowanceOf, CardStanding, cardStanding, matchesPin, NodeCardLimits, PinnedCard, pinOf } from "../core/node-cards";

/** Where pins are kept (NodeCardPins; an in-memory map in unit tests). */
export type PinStore = {
  /** The node's pins; on its first registration (none stored yet) `cards` become them. */
  register(nodeId: string, cards: PinnedCard[], now: Date): Promise<PinnedCard[]>;
  /** Adds `cards` to the node's pins (replacing pins of the same uuid); returns them all. */
  accept(nodeId: string, cards: PinnedCard[], by: string, now: Date): Promise<PinnedCard[]>;
};

export class NodeCardPins implements PinStore {
  constructor(private readonly db: Pool) {}

  async register(nodeId: string, cards: PinnedCard[], now: Date): Promise<PinnedCard[]> {
    for (let attempt = 0; attempt < 2; attempt++) {
      // One statement: the insert's row, or the stored one (a concurrent first insert is read on the second try).
      const { rows } = await this.db.query<{ cards: PinnedCard[] }>(
        `WITH ins AS (INSERT INTO gpu_scheduler.node_cards (node_id, cards, pinned_at) VALUES ($1, $2::jsonb, $3)
                      ON CONFLICT (node_id) DO NOTHING RETURNING cards)
         SELECT cards FROM ins UNION ALL SELECT cards FROM gpu_scheduler.node_cards WHERE node_id = $1`,
        [nodeId, JSON.stringify(cards), now],
      );
      if (rows.length) return rows[0].cards;
    }
    throw new Error(`The pinned cards of ${nodeId} could not be read`);
  }

  async accept(nodeId: string, cards: PinnedCard[], by: string, now: Date): Promise<PinnedCard[]> {
    const { rows } = await this.db.query<{ cards: PinnedCard[] }>(
      `INSERT INTO gpu_scheduler.node_cards AS n (node_id, cards, pinned_at, accepted_at, accepted_by) VALUES ($1, $3::jsonb, $4, $4, $5)
       ON CONFLICT (node_id) DO UPDATE SET accepted_at = $4, accepted_by = $5, cards = (
         SELECT coalesce(jsonb_agg(c), '[]'::jsonb) FROM (
           SELECT c FROM jsonb_array_elements(n.cards) c WHERE NOT (c->>'uuid' = ANY($2::text[]))
           UNION ALL SELECT c FROM jsonb_array_elements($3::jsonb) c) x)
       RETURNING cards`,
      [nodeId, cards.map((c) => c.uuid), JSON.stringify(cards), now, by],
    );
    return rows[0].cards;
  }
}

export class CardVetting {
  private readonly pins = new Map<string, Map<string, PinnedCard>>();

  constructor(
    /** Absent: no pinning (every announced card is accepted; GPU_NODE_CARDS still applies). */
    private readonly store: PinStore | undefined,
    private readonly limits: NodeCardLimits,
  ) {}

  /** Reads the node's pins when this replica lacks them or the heartbeat announces a card they do not match. */
  async refresh(hb: NodeHeartbeat, now: Date): Promise<void> {
    if (!this.store) return;
    const known = this.pins.get(hb.nodeId);
    if (known && hb.cards.every((c) => matchesPin(c, known))) return;
    this.remember(hb.nodeId, await this.store.register(hb.nodeId, hb.cards.map(pinOf), now));
  }

  /** Which of `cards` take jobs, from what this replica knows (a node whose pins are unknown: none, all pending). */
  standing(nodeId: string, cards: readonly GpuCard[]): CardStanding {
    const pins = this.store ? (this.pins.get(nodeId) ?? new Map<string, PinnedCard>()) : null;
    return cardStanding(cards, pins, allowanceOf(this.limits, nodeId));
  }

  async accept(nodeId: string, cards: readonly PinnedCard[], by: string, now: Date): Promise<void> {
    if (!this.store) return;
    this.remember(nodeId, await this.store.accept(nodeId, cards.map(pinOf), by, now));
  }

  private remember(nodeId: string, cards: PinnedCard[]): void {
    this.pins.set(nodeId, new Map(cards.map((c) => [c.uuid, c])));
  }
}

/**
 * Migration 14 (gpu-node cards pinned at first registration):
 * The cards a node announced first, plus those an administrator accepted since: other cards it
 * announces take no job (node-cards.ts). `cards`: [{ uuid, name, memoryTotal }].
 */
export const NODE_CARDS_TABLE = `
      CREATE TABLE node_cards (
        node_id text PRIMARY KEY,
        cards jsonb NOT NULL,
        pinned_at timestamptz NOT NULL,
        accepted_at timestamptz,
        accepted_by uuid
      );
`;
