import { mkdtempSync, rmSync } from "fs";
import os from "os";
import path from "path";
import { OUTPUT_TAIL_BYTES } from "../../lib/gpu-protocol";
import { decodeOutput, encodeOutput, storableText } from "../../lib/output-encoding";
import { recoverGap } from "../../services/gpu-node/docker-output";
import { LogBudget, logsToPrune, readLogChunk } from "../../services/gpu-node/log-store";
import { readLogPage } from "../../services/gpu-node/log-store";
import { DockerFrameDemuxer, OutputCapture, TailBuffer, truncationNote, utf8End } from "../../services/gpu-node/output";

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

  test("gpu-node output - the file stops at its cap with a complete note, the tail goes on", async () => {
    const capture = await OutputCapture.open(dir, "job-2", { maxFileBytes: 10, tailBytes: 8 });
    capture.append(Buffer.from("0123456789abcdef"));
    capture.append(Buffer.from("-end"));
    await capture.close();
    const page = await readLogPage(dir, "job-2");
    const note = truncationNote(10, 10);
    expect(note).toMatch(/^\[ci-platform: output truncated: 10 bytes omitted after the first 10 bytes .*\]$/);
    expect(page!.text).toBe(`0123456789\n${note}\n`);
    expect(capture.tailText()).toBe("cdef-end");
    // The result is the true tail, headed by the same note.
    expect(capture.result()).toEqual({ output: `${note}\ncdef-end` });
  });

  test("gpu-node output - a resumed log (adopted job) keeps its bytes, its cap and its tail", async () => {
    const first = await OutputCapture.open(dir, "job-r", { maxFileBytes: 12, tailBytes: 6 });
    first.append(Buffer.from("before\n"));
    await first.close();
    const again = await OutputCapture.open(dir, "job-r", { maxFileBytes: 12, tailBytes: 6, resume: true });
    expect(again.tailText()).toBe("efore\n".slice(-6));
    again.note("gap");
    again.append(Buffer.from("after-after\n"));
    await again.close();
    const text = (await readLogPage(dir, "job-r"))!.text;
    expect(text.startsWith("before\n\n[ci-platform: gap]\nafter")).toBe(true); // 7 + 5 bytes of the job's own output
    expect(text).toContain("output truncated: 7 bytes omitted after the first 12 bytes");
    expect(again.tailText()).toBe("after\n");
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

  test("gpu-node output - a log file behind the job says so, and says when it caught up", async () => {
    const capture = await OutputCapture.open(dir, "job-slow");
    capture.append(Buffer.alloc(1024 * 1024, 0x61)); // far over the file stream's buffer
    expect(capture.congested).toBe(true);
    await new Promise<void>((resolve) => capture.whenDrained(resolve));
    expect(capture.congested).toBe(false);
    await capture.close();
    let resumed = false;
    capture.whenDrained(() => (resumed = true)); // a closed log never holds a source paused
    expect(resumed).toBe(true);
  });

  test("gpu-node output - an unknown job has no log", async () => {
    expect(await readLogPage(dir, "nope")).toBeNull();
  });
});

describe("gpu-node output - bytes", () => {
  const cases: Array<{ name: string; bytes: Buffer; output: string; base64: boolean }> = [
    { name: "plain UTF-8 text stays as it is", bytes: Buffer.from("héllo €\n"), output: "héllo €\n", base64: false },
    { name: "a NUL byte shows as U+FFFD, the bytes go in base64", bytes: Buffer.from([0x61, 0x00, 0x62]), output: "a\ufffdb", base64: true },
    { name: "invalid UTF-8 shows as U+FFFD, the bytes go in base64", bytes: Buffer.from([0x61, 0xff, 0xfe, 0x62]), output: "a\ufffd\ufffdb", base64: true },
    { name: "a lone surrogate encoded in UTF-8 (CESU) is not text", bytes: Buffer.from([0xed, 0xa0, 0x80]), output: "\ufffd\ufffd\ufffd", base64: true },
  ];
  test.each(cases)("gpu-node output - $name", ({ bytes, output, base64 }) => {
    const encoded = encodeOutput(bytes);
    expect(encoded.output).toBe(output);
    expect(encoded.outputBase64 !== undefined).toBe(base64);
    expect(encoded.output).not.toContain("\u0000");
    expect(decodeOutput(encoded).equals(bytes)).toBe(true); // lossless either way
  });

  test("gpu-node output - storableText removes what PostgreSQL refuses (NUL, lone surrogates)", () => {
    expect(storableText("a\u0000b\ud800c")).toBe("a\ufffdb\ufffdc");
    expect(storableText("fine €")).toBe("fine €");
  });

  test("gpu-node output - the capture's result of a NUL-printing job is lossless", async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "gpu-node-output-"));
    try {
      const capture = await OutputCapture.open(dir, "nul");
      const bytes = Buffer.from([0x41, 0x00, 0x42, 0xff, 0x0a]);
      capture.append(bytes);
      await capture.close();
      const result = capture.result();
      expect(result.output).toBe("A\ufffdB\ufffd\n");
      expect(Buffer.from(result.outputBase64!, "base64").equals(bytes)).toBe(true);
      const page = await readLogChunk(dir, "nul");
      expect(Buffer.from(page!.data, "base64").equals(bytes)).toBe(true); // the log keeps the raw bytes
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("gpu-node output - log storage", () => {
  const MB = 1024 * 1024;
  const now = 10 * 24 * 3600 * 1000;
  const day = 24 * 3600 * 1000;
  const file = (jobId: string, mb: number, ageDays: number) => ({ jobId, bytes: mb * MB, mtimeMs: now - ageDays * day });
  const cases = [
    { name: "under both limits nothing goes", files: [file("a", 1, 1), file("b", 1, 2)], active: [], expected: [] },
    { name: "older than 7 days goes", files: [file("old", 1, 8), file("new", 1, 1)], active: [], expected: ["old"] },
    { name: "over the total the oldest go first, until it fits", files: [file("n", 4, 1), file("o", 4, 3), file("m", 4, 2)], active: [], expected: ["o", "m"] },
    { name: "a running job's log is never removed", files: [file("run", 6, 3), file("done", 4, 1)], active: ["run"], expected: ["done"] },
  ];
  test.each(cases)("gpu-node output - prune: $name", ({ files, active, expected }) => {
    expect(logsToPrune(files, { maxAgeMs: 7 * day, maxTotalBytes: 5 * MB, now, active: new Set(active) })).toEqual(expected);
  });
});

describe("gpu-node - log budget", () => {
  test("gpu-node - a finished log asks for a scan only before the first scan and once the cap is crossed", () => {
    const budget = new LogBudget(100);
    expect(budget.add(10)).toBe(true); // nothing scanned yet: the total is unknown
    budget.scanned(50);
    expect(budget.add(30)).toBe(false); // 80
    expect(budget.add(20)).toBe(false); // 100: at the cap, not over
    expect(budget.add(1)).toBe(true); // 101
    budget.scanned(40);
    expect(budget.add(59)).toBe(false);
  });
});

describe("gpu-node - output printed while no node watched", () => {
  const T = Date.parse("2026-11-24T10:00:00.000Z");
  /** The engine's log as `docker logs --timestamps` frames it: [stream, 0, 0, 0, size] + "<RFC3339Nano> <line>". */
  const engineLog = (entries: Array<[number, string]>) =>
    Buffer.concat(
      entries.map(([ms, line]) => {
        const payload = Buffer.from(`${new Date(T + ms).toISOString().replace("Z", "123456Z")} ${line}`);
        const header = Buffer.alloc(8);
        header[0] = 1;
        header.writeUInt32BE(payload.length, 4);
        return Buffer.concat([header, payload]);
      }),
    );
  const container = (entries: Array<[number, string]>) => ({ logs: async () => engineLog(entries) }) as never;

  test.each([
    [
      "a line the engine stamped just after the node's last write is not written twice",
      ["line-0\n"],
      [
        [3, "line-0\n"],
        [1000, "line-1\n"],
        [2000, "line-2\n"],
      ],
      "line-0\nline-1\nline-2\n",
    ],
    [
      "a line stamped just before the last write is not written twice",
      ["line-0\n"],
      [
        [-3, "line-0\n"],
        [1000, "line-1\n"],
      ],
      "line-0\nline-1\n",
    ],
    [
      "a line stamped near the last write that was not captured is recovered",
      ["line-0\n"],
      [
        [-300, "line-0\n"],
        [2, "line-1\n"],
        [900, "line-2\n"],
      ],
      "line-0\nline-1\nline-2\n",
    ],
    [
      "the same text printed again later is kept",
      ["x\n"],
      [
        [2, "x\n"],
        [1500, "x\n"],
      ],
      "x\nx\n",
    ],
    [
      "lines printed after the new attach are left to the attached stream",
      ["a\n"],
      [
        [1000, "b\n"],
        [5000, "c\n"],
      ],
      "a\nb\n",
    ],
  ] as Array<[string, string[], Array<[number, string]>, string]>)("gpu-node - %s", async (_name, before, entries, expected) => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "gap-"));
    try {
      const capture = await OutputCapture.open(dir, "job-gap");
      for (const line of before) capture.append(Buffer.from(line));
      await recoverGap(container(entries), capture, T, T + 3000);
      expect(capture.result().output).toBe(expected);
      await capture.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
