/** Per-sender budgets, the registry's service filter and the scheduler's heartbeat coalescing (pure parts). */
import { budgetOf, NODE_BUDGETS, TokenBuckets } from "../../lib/bus-budget";
import { senderMayHost } from "../../lib/bus-identity";
import type { NodeHeartbeat } from "../../lib/gpu-protocol";
import { HeartbeatInbox } from "../../services/gpu-scheduler/loop/heartbeat-inbox";

describe("bus budget - token buckets", () => {
  it("bus budget - a sender gets its burst, then its rate; another sender is not affected", () => {
    const buckets = new TokenBuckets();
    const budget = { perSecond: 10, burst: 20 };
    let taken = 0;
    for (let i = 0; i < 1000; i++) if (buckets.take("a", budget, 0)) taken++;
    expect(taken).toBe(20);
    expect(buckets.take("b", budget, 0)).toBe(true);
    // 500 ms later: 5 more.
    taken = 0;
    for (let i = 0; i < 100; i++) if (buckets.take("a", budget, 500)) taken++;
    expect(taken).toBe(5);
    // A long silence refills to the burst, never beyond.
    taken = 0;
    for (let i = 0; i < 100; i++) if (buckets.take("a", budget, 3_600_000)) taken++;
    expect(taken).toBe(20);
  });

  it("bus budget - only gpu-node senders are budgeted, per packet kind", () => {
    expect(budgetOf("gpu-node", "EVENT")).toBe(NODE_BUDGETS.EVENT);
    expect(budgetOf("gpu-node", "RES")).toBe(NODE_BUDGETS.RES);
    expect(budgetOf("gpu-node", "DISCOVER")).toBe(NODE_BUDGETS.other);
    expect(budgetOf("auth", "EVENT")).toBeUndefined();
    expect(budgetOf("core", "REQ")).toBeUndefined();
    expect(budgetOf(undefined, "EVENT")).toBeUndefined();
  });
});

describe("bus budget - services a node may offer", () => {
  it.each([
    ["gpu-node.n1", "gpu-node", true],
    ["gpu-node.n1", "$node", true],
    ["gpu-node.n1", "auth", false],
    ["gpu-node.n1", "gpu-scheduler", false],
    ["gpu-node.n1", "dbaas", false],
    ["core.host-1", "auth", true],
    ["core.host-1", "gpu-scheduler", true],
    ["core.host-1", "gpu-node", false],
    ["auth.a1", "auth", true],
    ["auth.a1", "usage", false],
    ["not-a-role-id", "auth", false],
  ])("bus budget - %s offering %s: %s", (sender, service, ok) => {
    expect(senderMayHost(sender, service)).toBe(ok);
  });
});

const hb = (nodeId: string, n: number): NodeHeartbeat => ({
  nodeId,
  cards: [],
  runningJobIds: [`job-${n}`],
  executor: "process",
  at: new Date(n).toISOString(),
});

describe("bus budget - heartbeats coalesced per node", () => {
  it("bus budget - a flooding node costs one apply in flight and one waiting; another node is applied in its turn", async () => {
    const applied: string[] = [];
    let release: () => void = () => undefined;
    const inbox = new HeartbeatInbox(async (h) => {
      applied.push(`${h.nodeId}:${h.runningJobIds[0]}`);
      if (applied.length === 1) await new Promise<void>((r) => (release = r));
    });
    const pushes = [inbox.push(hb("rogue", 0))];
    for (let i = 1; i <= 1000; i++) pushes.push(inbox.push(hb("rogue", i)));
    pushes.push(inbox.push(hb("honest", 0)));
    release();
    await Promise.all(pushes);
    await inbox.idle();
    // The first was under way; the 1000 after it became one (the latest); the honest node's was applied too.
    expect(applied).toEqual(["rogue:job-0", "rogue:job-1000", "honest:job-0"]);
    expect(inbox.superseded).toBe(999);
  });

  it("bus budget - a failed apply is reported to that heartbeat's waiter only", async () => {
    const inbox = new HeartbeatInbox(async (h) => {
      if (h.nodeId === "bad") throw new Error("database down");
    });
    await expect(inbox.push(hb("bad", 1))).rejects.toThrow("database down");
    await expect(inbox.push(hb("good", 1))).resolves.toBeUndefined();
  });

  it("bus budget - a node's heartbeats are applied at most once per interval, others' meanwhile", async () => {
    let ms = 0;
    const applied: string[] = [];
    const inbox = new HeartbeatInbox(
      async (h) => void applied.push(`${h.nodeId}@${ms}`),
      1000,
      () => ms,
    );
    await inbox.push(hb("a", 1));
    const second = inbox.push(hb("a", 2));
    await inbox.push(hb("b", 1)); // not held up behind a's wait
    expect(applied).toEqual(["a@0", "b@0"]);
    ms = 1000;
    await second;
    expect(applied).toEqual(["a@0", "b@0", "a@1000"]);
  });

  it("bus budget - once closed (stopping), waiting heartbeats are let go and new ones not applied", async () => {
    const applied: string[] = [];
    const inbox = new HeartbeatInbox(async (h) => void applied.push(h.nodeId), 60_000);
    await inbox.push(hb("a", 1));
    const waiting = inbox.push(hb("a", 2));
    inbox.close();
    await waiting;
    await inbox.push(hb("c", 1));
    expect(applied).toEqual(["a"]);
  });
});
