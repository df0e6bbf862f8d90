import { mkdtempSync, rmSync } from "fs";
import os from "os";
import path from "path";
import { OUTPUT_TAIL_BYTES } from "../../lib/gpu-protocol";
import { DockerFrameDemuxer, OutputCapture, readLogPage, TailBuffer, utf8End } from "../../services/gpu-node/output";

function frame(stream: 1 | 2, text: string): Buffer {
  const payload = Buffer.from(text);
  const header = Buffer.alloc(8);
  header[0] = stream;
  header.writeUInt32BE(payload.length, 4);
  return Buffer.concat([header, payload]);
}

describe("gpu-node output - tail", () => {
  test("gpu-node output - short output is kept whole", () => {
    const tail = new TailBuffer(16);
    tail.push(Buffer.from("hello "));
    tail.push(Buffer.from("world"));
    expect(tail.text()).toBe("hello world");
  });

  test("gpu-node output - long output keeps exactly the last bytes", () => {
    const tail = new TailBuffer(10);
    for (let i = 0; i < 100; i++) tail.push(Buffer.from(`${i % 10}`));
    expect(tail.text()).toBe("0123456789");
  });

  test("gpu-node output - the default cap is 64 KiB", () => {
    const tail = new TailBuffer();
    const line = Buffer.from("x".repeat(1023) + "\n");
    for (let i = 0; i < 200; i++) tail.push(line);
    tail.push(Buffer.from("END"));
    const text = tail.text();
    expect(Buffer.byteLength(text)).toBe(OUTPUT_TAIL_BYTES);
    expect(text.endsWith("\nEND")).toBe(true);
  });

  test("gpu-node output - a multi-byte character cut by the cap is dropped, not garbled", () => {
    const tail = new TailBuffer(5);
    tail.push(Buffer.from("aé€b")); // 1 + 2 + 3 + 1 bytes: the window starts inside "é"
    expect(tail.text()).toBe("€b");
  });

  test("gpu-node output - utf8End never splits a character", () => {
    const buf = Buffer.from("a€"); // 1 + 3 bytes
    expect(utf8End(buf, 2)).toBe(1);
    expect(utf8End(buf, 3)).toBe(1);
    expect(utf8End(buf, 4)).toBe(4);
  });
});

describe("gpu-node output - Docker stream frames", () => {
  test("gpu-node output - frames are split in arrival order whatever the chunking", () => {
    const stream = Buffer.concat([frame(1, "out1\n"), frame(2, "err1\n"), frame(1, "out2\n")]);
    for (const chunkSize of [1, 3, 7, 8, 9, stream.length]) {
      const seen: string[] = [];
      const demux = new DockerFrameDemuxer((payload, kind) => seen.push(`${kind}:${payload}`));
      for (let i = 0; i < stream.length; i += chunkSize) demux.push(stream.subarray(i, i + chunkSize));
      expect(seen).toEqual(["stdout:out1\n", "stderr:err1\n", "stdout:out2\n"]);
    }
  });

  test("gpu-node output - an incomplete frame waits for the rest", () => {
    const seen: string[] = [];
    const demux = new DockerFrameDemuxer((payload) => seen.push(String(payload)));
    const whole = frame(1, "abcdef");
    demux.push(whole.subarray(0, 10));
    expect(seen).toEqual([]);
    demux.push(whole.subarray(10));
    expect(seen).toEqual(["abcdef"]);
  });
});

describe("gpu-node output - log file", () => {
  let dir: string;
  beforeEach(() => (dir = mkdtempSync(path.join(os.tmpdir(), "gpu-node-output-"))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  test("gpu-node output - the file keeps everything, the tail only the end", async () => {
    const capture = await OutputCapture.open(dir, "job-1", { tailBytes: 4 });
    capture.append(Buffer.from("first\n"));
    capture.append(Buffer.from("second\n"));
    await capture.close();
    expect(capture.tailText()).toBe("ond\n");
    expect(await readLogPage(dir, "job-1")).toEqual({ text: "first\nsecond\n", offset: 0, nextOffset: null, totalBytes: 13 });
  });

  test("gpu-node output - the file stops at its cap with a note, the tail goes on", async () => {
    const capture = await OutputCapture.open(dir, "job-2", { maxFileBytes: 10, tailBytes: 8 });
    capture.append(Buffer.from("0123456789abcdef"));
    capture.append(Buffer.from("-end"));
    await capture.close();
    const page = await readLogPage(dir, "job-2");
    expect(page!.text.startsWith("0123456789\n[ci-platform: the log stops here at 10 bytes")).toBe(true);
    expect(page!.text).not.toContain("abcdef");
    expect(capture.tailText()).toBe("cdef-end");
  });

  test("gpu-node output - pages follow nextOffset and cut on character boundaries", async () => {
    const capture = await OutputCapture.open(dir, "job-3");
    const text = "ab€cd€".repeat(5);
    capture.append(Buffer.from(text));
    await capture.close();
    let offset: number | null = 0;
    let joined = "";
    let pages = 0;
    while (offset !== null) {
      const page: Awaited<ReturnType<typeof readLogPage>> = await readLogPage(dir, "job-3", offset, 4);
      expect(page!.text).not.toContain("\ufffd");
      joined += page!.text;
      offset = page!.nextOffset;
      pages++;
    }
    expect(joined).toBe(text);
    expect(pages).toBeGreaterThan(5);
  });

  test("gpu-node output - an unknown job has no log", async () => {
    expect(await readLogPage(dir, "nope")).toBeNull();
  });
});
