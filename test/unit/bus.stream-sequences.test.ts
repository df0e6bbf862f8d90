/** A stream's packets on the bus with one missing: the stream ends with an error at once (lib/stream-sequences.ts, pure). */
import { StreamSequences, type StreamPayload } from "../../lib/stream-sequences";

const chunk = (id: string, seq: number, stream = true): StreamPayload => ({ id, seq, stream, sender: "gpu-node.n1", success: true, data: "x", meta: {} });
const awaited = () => true;

describe("bus stream sequences", () => {
  it("bus stream sequences - packets in order pass, and an ended stream is forgotten", () => {
    const s = new StreamSequences();
    for (let seq = 0; seq < 5; seq++) expect(s.check("RES", chunk("a", seq), awaited)).toBe("ok");
    expect(s.check("RES", chunk("a", 5, false), awaited)).toBe("ok");
    expect(s.size).toBe(0);
  });

  it("bus stream sequences - a gap ends the answer with an error at the seq expected; later packets are dropped", () => {
    const s = new StreamSequences();
    expect(s.check("RES", chunk("a", 0), awaited)).toBe("ok");
    expect(s.check("RES", chunk("a", 1), awaited)).toBe("ok");
    const third = chunk("a", 4);
    expect(s.check("RES", third, awaited)).toBe("gap");
    expect(third).toMatchObject({ seq: 2, stream: false, success: false, data: null, error: { code: 502, type: "STREAM_PACKETS_LOST" } });
    expect((third.error as { message: string }).message).toBe("A stream from gpu-node.n1 lost packets: #2 to #3 never arrived");
    expect(s.check("RES", chunk("a", 5), awaited)).toBe("drop");
    expect(s.check("RES", chunk("a", 6, false), awaited)).toBe("drop");
    // Another stream is not affected.
    expect(s.check("RES", chunk("b", 0), awaited)).toBe("ok");
    expect(s.check("RES", chunk("b", 1), awaited)).toBe("ok");
  });

  it("bus stream sequences - a request stream's gap ends it with $streamError; one whose opening packet is missing is dropped", () => {
    const s = new StreamSequences();
    const opening = { ...chunk("r", 0), params: null };
    expect(s.check("REQ", opening, awaited)).toBe("ok");
    const late = { ...chunk("r", 3), params: "x" };
    expect(s.check("REQ", late, awaited)).toBe("gap");
    expect(late).toMatchObject({ seq: 1, stream: false, params: null, meta: { $streamError: { type: "STREAM_PACKETS_LOST" } } });
    expect(s.check("REQ", chunk("headless", 2), awaited)).toBe("drop");
    expect(s.check("REQ", chunk("headless", 3), awaited)).toBe("drop");
  });

  it("bus stream sequences - the rest of a request stream no handler reads (it rejected) is dropped, and forgotten at its end", () => {
    const s = new StreamSequences();
    let read = true;
    const reading = () => read;
    expect(s.check("REQ", { ...chunk("r", 0), params: null }, reading)).toBe("ok");
    expect(s.check("REQ", { ...chunk("r", 1), params: "x" }, reading)).toBe("ok");
    read = false; // the handler rejected: Moleculer forgot the stream
    expect(s.check("REQ", { ...chunk("r", 2), params: "y" }, reading)).toBe("drop");
    expect(s.check("REQ", { ...chunk("r", 3), params: "z" }, reading)).toBe("drop");
    expect(s.size).toBe(1);
    expect(s.check("REQ", chunk("r", 4, false), reading)).toBe("drop");
    expect(s.size).toBe(0);
    // Its end right after the rejection (a tunnel closing on the error) is dropped and forgotten too.
    expect(s.check("REQ", { ...chunk("e", 0), params: null }, () => true)).toBe("ok");
    expect(s.check("REQ", chunk("e", 1, false), () => false)).toBe("drop");
    expect(s.size).toBe(0);
  });

  it("bus stream sequences - an answer whose opening packet is lost fails if awaited, else is left to Moleculer (an orphan)", () => {
    const s = new StreamSequences();
    const first = chunk("lost-head", 1);
    expect(s.check("RES", first, awaited)).toBe("gap");
    expect(first).toMatchObject({ seq: 0, stream: false, success: false });
    expect(s.check("RES", chunk("orphan", 1), () => false)).toBe("ok");
  });

  it("bus stream sequences - a repeat is dropped; packets that are no stream's (no seq) pass untouched", () => {
    const s = new StreamSequences();
    expect(s.check("RES", chunk("a", 0), awaited)).toBe("ok");
    expect(s.check("RES", chunk("a", 1), awaited)).toBe("ok");
    expect(s.check("RES", chunk("a", 1), awaited)).toBe("drop");
    const plain: StreamPayload = { id: "p", stream: false, success: true, data: { ok: 1 } };
    expect(s.check("RES", plain, awaited)).toBe("ok");
    expect(plain).toEqual({ id: "p", stream: false, success: true, data: { ok: 1 } });
    expect(s.check("RES", { id: "n", seq: -1, stream: true }, awaited)).toBe("ok");
  });
});
