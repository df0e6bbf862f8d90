/** The paged body stream: pages are fetched only as the reader takes them, and a reader that leaves stops it. */
import { Writable } from "stream";
import { pipeline } from "stream/promises";
import { BodyPage, PagedBodyStream } from "../../lib/paged-body";

/** Lets `n` rounds of pending callbacks run (no timers: nothing here waits on the clock). */
const turns = async (n: number) => {
  for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
};
const b64 = (s: string) => Buffer.from(s).toString("base64");

/** A source of `pages` pages of `size` bytes each; records which pages were asked for. */
function source(pages: number, size = 1024) {
  const asked: number[] = [];
  const page = (n: number): BodyPage => ({ data: b64(String(n % 10).repeat(size)), next: n + 1 < pages ? { n: n + 1 } : null });
  const fetch = async (params: Record<string, unknown>) => {
    asked.push(params.n as number);
    return page(params.n as number);
  };
  return { asked, first: page(0), fetch };
}

describe("paged body", () => {
  test("paged body - every page arrives, in order, then the stream ends", async () => {
    const s = source(5);
    let text = "";
    await pipeline(new PagedBodyStream(s.first, s.fetch, () => "!"), new Writable({ write: (c, _e, cb) => ((text += c), cb()) }));
    expect(text).toBe(["0", "1", "2", "3", "4"].map((d) => d.repeat(1024)).join(""));
    expect(s.asked).toEqual([1, 2, 3, 4]);
  });

  test("paged body - a reader that does not read gets no more pages fetched", async () => {
    const s = source(1000, 64 * 1024);
    const stream = new PagedBodyStream(s.first, s.fetch, () => "!");
    stream.once("data", () => stream.pause());
    await turns(50); // every fetch resolves within a few event-loop turns
    expect(s.asked.length).toBeLessThan(3); // the highWaterMark is below one page
    stream.destroy(); // the client left
    const asked = s.asked.length;
    stream.resume();
    await turns(50);
    expect(s.asked.length).toBe(asked);
  });

  test("paged body - a page that fails ends the body with a note instead of hanging", async () => {
    const stream = new PagedBodyStream(
      { data: b64("first"), next: { n: 1 } },
      async () => Promise.reject(new Error("node gone")),
      (err) => `[${err.message}]`,
    );
    let text = "";
    for await (const chunk of stream) text += chunk;
    expect(text).toBe("first[node gone]");
  });
});
