/** A batch input file checked line by line (services/inference/batches/batch-input.ts): tables of named cases, no broker. */
import { checkBatchInput, MAX_LINES } from "../../services/inference/batches/batch-input";

const chat = (customId: string, body: Record<string, unknown> = { model: "m", messages: [{ role: "user", content: "hi" }] }) =>
  JSON.stringify({ custom_id: customId, method: "POST", url: "/v1/chat/completions", body });
const embed = (customId: string) => JSON.stringify({ custom_id: customId, method: "POST", url: "/v1/embeddings", body: { model: "e", input: "x" } });
const faultsOf = (text: string | Buffer): string[] => {
  try {
    checkBatchInput(Buffer.isBuffer(text) ? text : Buffer.from(text));
  } catch (err) {
    return ((err as { data: Array<{ message: string }> }).data ?? []).map((d) => d.message);
  }
  return [];
};

describe("inference - batch input files", () => {
  test("inference - batch input: lines with their numbers (blank lines skipped, CRLF and a last line without newline read), one endpoint", () => {
    const checked = checkBatchInput(Buffer.from(`${chat("a")}\r\n\n${chat("b")}`));
    expect(checked.lines.map((l) => [l.line, l.customId, l.url])).toEqual([
      [1, "a", "/v1/chat/completions"],
      [3, "b", "/v1/chat/completions"],
    ]);
    expect(checked.endpoint).toBe("/v1/chat/completions");
    expect(checkBatchInput(Buffer.from(`${chat("a")}\n${embed("b")}`)).endpoint).toBeNull();
  });

  test.each([
    ["not JSON", "{oops", "line 1: is not valid JSON"],
    ["not an object", "[1]", "line 1: must be a JSON object"],
    ["an unknown field", JSON.stringify({ custom_id: "a", method: "POST", url: "/v1/embeddings", body: {}, extra: 1 }), "line 1: unknown field(s) extra"],
    ["no custom_id", JSON.stringify({ method: "POST", url: "/v1/embeddings", body: {} }), "line 1: custom_id must be"],
    ["GET", JSON.stringify({ custom_id: "a", method: "GET", url: "/v1/embeddings", body: {} }), 'line 1: method must be "POST"'],
    ["another url", JSON.stringify({ custom_id: "a", method: "POST", url: "/v1/completions", body: {} }), "line 1: url must be one of"],
    ["a body its route refuses", chat("a", { model: "m", messages: [] }), "line 1: body.messages: must be a list"],
    ["an unknown body field", chat("a", { model: "m", messages: [{ role: "user", content: "x" }], bogus: 1 }), "line 1: body.bogus"],
    ["a streamed chat", chat("a", { model: "m", stream: true, messages: [{ role: "user", content: "x" }] }), "line 1: body.stream: streaming is not available"],
    ["a repeated custom_id", `${chat("a")}\n${chat("a")}`, 'line 2: custom_id "a" is already used on line 1'],
    ["nothing", "\n\n", "must hold at least one request line"],
    ["not UTF-8", Buffer.from([0xff, 0xfe, 0x0a]), "must be UTF-8 text (JSONL)"],
  ])("inference - batch input: %s is refused naming its line", (_name, text, expected) => {
    expect(faultsOf(text)).toEqual([expect.stringContaining(expected)]);
  });

  test("inference - batch input: more than the most lines is one fault; at most 20 faults are named", () => {
    expect(faultsOf(Array.from({ length: MAX_LINES + 1 }, (_, i) => chat(`c${i}`)).join("\n"))).toEqual([
      `must hold at most ${MAX_LINES} lines, not ${MAX_LINES + 1}`,
    ]);
    expect(faultsOf(Array.from({ length: 30 }, () => "{").join("\n"))).toHaveLength(20);
  });
});
