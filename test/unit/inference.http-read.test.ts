/**
 * A provider's answer body read whole (providers/http.ts readText/readJson) from a real local
 * server on port 0: the text in one or many chunks, the size cap, and a connection cut mid-body.
 */
import http from "http";
import type { AddressInfo } from "net";
import { HttpEndpoint, readJson, readText } from "../../services/inference/providers/http";
import { ProviderFailure } from "../../services/inference/providers";

type Answer = (res: http.ServerResponse) => void;

let answer: Answer = (res) => res.end("{}");
const server = http.createServer((req, res) => req.resume().once("end", () => answer(res)));
let endpoint: HttpEndpoint;

beforeAll(async () => {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  endpoint = new HttpEndpoint(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

const fetchWith = async (a: Answer) => {
  answer = a;
  return endpoint.send("POST", "/x", { q: 1 }, new AbortController().signal);
};
const failureOf = async (work: Promise<unknown>) => {
  try {
    await work;
  } catch (err) {
    return err as ProviderFailure;
  }
  throw new Error("expected a failure");
};

describe("inference - provider answers read whole", () => {
  test("inference - http read: a body in many chunks (a multi-byte character split between them) is one text", async () => {
    const res = await fetchWith((r) => {
      const bytes = Buffer.from('{"text":"blå himmel"}');
      r.write(bytes.subarray(0, 12)); // inside "å"
      setImmediate(() => r.end(bytes.subarray(12)));
    });
    expect(await readJson(res, new AbortController().signal)).toEqual({ text: "blå himmel" });
  });

  test("inference - http read: an empty body is the empty text", async () => {
    expect(await readText(await fetchWith((r) => r.end()), new AbortController().signal)).toBe("");
  });

  test("inference - http read: over the limit is refused as too large", async () => {
    const res = await fetchWith((r) => r.end("x".repeat(100)));
    const failure = await failureOf(readText(res, new AbortController().signal, 10));
    expect([failure instanceof ProviderFailure, failure.kind, failure.message]).toEqual([true, "error", "Model provider answer is too large"]);
  });

  test("inference - http read: the connection cut mid-body is a provider error, not a truncated answer", async () => {
    const res = await fetchWith((r) => {
      r.writeHead(200, { "content-length": "100" });
      r.write('{"text":"par');
      setImmediate(() => r.socket?.destroy());
    });
    const failure = await failureOf(readJson(res, new AbortController().signal));
    expect([failure.kind, failure.message]).toEqual(["error", "Model provider closed the connection mid-response"]);
  });

  test("inference - http read: aborted mid-body is the abort's reason", async () => {
    const control = new AbortController();
    answer = (r) => {
      r.writeHead(200, { "content-length": "100" });
      r.write("{");
    };
    const slow = await endpoint.send("POST", "/x", {}, control.signal);
    const reading = readText(slow, control.signal);
    control.abort(new ProviderFailure("timeout", "No answer within 1 ms"));
    const failure = await failureOf(reading);
    expect([failure.kind, failure.message]).toEqual(["timeout", "No answer within 1 ms"]);
  });
});
