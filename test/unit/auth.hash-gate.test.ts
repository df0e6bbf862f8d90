/**
 * auth - the password-hash gate (services/auth/hash-gate.ts): at most `limit` hashes at once, at
 * most `queue` waiting, the rest refused with 503 and a retry time; a failed hash frees its slot.
 */
import { HashGate } from "../../services/auth/hash-gate";

/** A hash the test finishes by hand; `live` counts those running now. */
function manualHashes() {
  const pending: Array<{ finish: () => void; fail: () => void }> = [];
  let live = 0;
  const hash = () =>
    new Promise<string>((resolve, reject) => {
      live++;
      pending.push({ finish: () => (live--, resolve("hashed")), fail: () => (live--, reject(new Error("scrypt failed"))) });
    });
  return { pending, hash, live: () => live };
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

describe("auth - hash gate", () => {
  it.each([
    ["one slot, no queue", 1, 0, 3, { running: 1, refused: 2 }],
    ["two slots, two waiting", 2, 2, 7, { running: 2, refused: 3 }],
    ["room for everyone", 4, 4, 5, { running: 4, refused: 0 }],
  ])("auth - hash gate - %s", async (_name, limit, queue, requests, want) => {
    const gate = new HashGate(limit, queue);
    const hashes = manualHashes();
    const results = Array.from({ length: requests }, () =>
      gate.run(hashes.hash).then(
        (v) => v,
        (err: { code: number; type: string; data: unknown }) => err,
      ),
    );
    await settle();
    expect({
      running: hashes.live(),
      refused: (await Promise.all(results.map((r) => Promise.race([r, settle().then(() => null)])))).filter(Boolean).length,
    }).toEqual(want);
    // every admitted request finishes, never more than `limit` at once
    while (hashes.pending.length) {
      hashes.pending.shift()!.finish();
      await settle();
      expect(hashes.live()).toBeLessThanOrEqual(limit);
    }
    const outcomes = await Promise.all(results);
    expect(outcomes.filter((o) => o === "hashed")).toHaveLength(requests - want.refused);
    for (const refused of outcomes.filter((o) => o !== "hashed"))
      expect(refused).toMatchObject({ code: 503, type: "SERVICE_UNAVAILABLE", data: { retryAfter: 1 } });
    expect(gate.peak).toBe(want.running);
  });

  it("auth - hash gate - a failed hash frees its slot for the next waiter", async () => {
    const gate = new HashGate(1, 1);
    const hashes = manualHashes();
    const first = gate.run(hashes.hash).catch((err: Error) => err.message);
    const second = gate.run(hashes.hash);
    await settle();
    expect(hashes.live()).toBe(1);
    hashes.pending.shift()!.fail();
    await settle();
    expect(await first).toBe("scrypt failed");
    expect(hashes.live()).toBe(1);
    hashes.pending.shift()!.finish();
    expect(await second).toBe("hashed");
    // and the gate is empty again: a new request runs at once
    const third = gate.run(hashes.hash);
    await settle();
    expect(hashes.live()).toBe(1);
    hashes.pending.shift()!.finish();
    expect(await third).toBe("hashed");
  });
});
