/** The pace of a replica's answers on the bus (services/gpu-node/serve-pacing.ts). */
import { CoalescedAnswer, PacketPacer, SERVE_PACKETS } from "../../services/gpu-node/serve-pacing";
import { NODE_BUDGETS } from "../../lib/bus-budget";

/** The packets `answer` sends, and the whole text once it ends. */
function collect(answer: CoalescedAnswer): { packets: string[]; done: Promise<string> } {
  const packets: string[] = [];
  answer.on("data", (c: Buffer) => packets.push(c.toString()));
  return { packets, done: new Promise((resolve) => answer.once("end", () => resolve(packets.join("")))) };
}

describe("gpu-node serve pacing", () => {
  it("serve pacing - stays within the receivers' RES budget, leaving room for the node's other answers", () => {
    expect(SERVE_PACKETS.perSecond).toBeLessThan(NODE_BUDGETS.RES.perSecond);
    expect(SERVE_PACKETS.burst).toBeLessThan(NODE_BUDGETS.RES.burst);
  });

  it("serve pacing - a chunk goes at once while packets are to spare (no delay on a quiet answer)", () => {
    const answer = new CoalescedAnswer(new PacketPacer({ perSecond: 10, burst: 5 }));
    const { packets } = collect(answer);
    answer.write("HTTP/1.1 200 OK\r\n\r\n{}");
    expect(packets).toEqual(["HTTP/1.1 200 OK\r\n\r\n{}"]);
  });

  it("serve pacing - out of packets, writes are coalesced in order into the next packet, and the end follows", async () => {
    const answer = new CoalescedAnswer(new PacketPacer({ perSecond: 50, burst: 1 }));
    const { packets, done } = collect(answer);
    for (let i = 0; i < 100; i++) answer.write(`${i},`);
    answer.end();
    const text = await done;
    expect(text).toBe(Array.from({ length: 100 }, (_, i) => `${i},`).join(""));
    expect(packets.length).toBe(2);
    expect(packets[0]).toBe("0,");
  });

  it("serve pacing - streams sharing a pacer take turns and none loses bytes", async () => {
    const pacer = new PacketPacer({ perSecond: 200, burst: 2 });
    const answers = [0, 1, 2].map(() => new CoalescedAnswer(pacer));
    const results = answers.map(collect);
    for (let i = 0; i < 50; i++) answers.forEach((a, n) => a.write(`${n}:${i};`));
    answers.forEach((a) => a.end());
    const texts = await Promise.all(results.map((r) => r.done));
    texts.forEach((t, n) => expect(t).toBe(Array.from({ length: 50 }, (_, i) => `${n}:${i};`).join("")));
    expect(results.reduce((sum, r) => sum + r.packets.length, 0)).toBeLessThan(150);
  });
});
