/**
 * The pure parts of input hardening: which strings are refused and where, the size of forwarded
 * params, the raw answers to HTTP parser errors, batch isolation, and opaque node labels.
 */
import { findUnstorable, jsonSize, MAX_DEPTH, stringProblem } from "../../lib/input-guard";
import { fromDataError } from "../../lib/errors";
import { toPublicError } from "../../services/api-gateway/error-mapper";
import { classifyClientError, rawErrorResponse } from "../../services/api-gateway/http-server";
import { buildOpenApi } from "../../services/api-gateway/openapi/generator";
import { Batcher } from "../../services/gpu-scheduler/loop/batcher";
import { nodeLabel } from "../../services/gpu-scheduler/core/cluster-view";
import { toJobDetail } from "../../services/gpu-scheduler/api/job-view";
import type { JobRow } from "../../services/gpu-scheduler/store/job-row";

describe("input guard - strings that cannot be stored", () => {
  it.each([
    ["plain text", "hello", null],
    ["text beyond the BMP (a surrogate pair)", "😀 𝄞", null],
    ["other control characters", "\u0001\u0007\u001f", null],
    ["a NUL", "a\u0000b", /NUL/],
    ["a lone high surrogate", "a\ud800", /surrogate/],
    ["a lone low surrogate", "\udc00a", /surrogate/],
    ["a reversed pair", "\udc00\ud800", /surrogate/],
  ])("input guard - %s", (_name, value, expected) => {
    const problem = stringProblem(value);
    if (expected === null) expect(problem).toBeNull();
    else expect(problem).toMatch(expected);
  });

  it("input guard - fields are named by path, keys included; only the first few are listed", () => {
    expect(findUnstorable({ a: "ok", b: { c: ["x", "y\u0000"] }, ["k\u0000"]: 1 })).toEqual([
      { field: "b.c[1]", message: expect.stringMatching(/'b\.c\[1\]'.*NUL/) },
      { field: "k\u0000", message: expect.stringMatching(/field name/) },
    ]);
    expect(findUnstorable({ list: Array.from({ length: 50 }, () => "\u0000") })).toHaveLength(10);
    expect(findUnstorable("top\u0000")).toEqual([expect.objectContaining({ field: "(params)" })]);
  });

  it("input guard - class instances (requests, streams, buffers) are not walked; plain data is", () => {
    class Holder {
      text = "\u0000";
    }
    expect(findUnstorable({ req: new Holder(), buf: Buffer.from([0]) })).toEqual([]);
    expect(findUnstorable(Object.assign(Object.create(null), { x: "\u0000" }))).toHaveLength(1);
  });

  it("input guard - nesting deeper than the limit is refused, not recursed into without end", () => {
    let deep: unknown = "leaf";
    for (let i = 0; i < MAX_DEPTH + 5; i++) deep = { d: deep };
    expect(findUnstorable(deep)).toEqual([expect.objectContaining({ message: expect.stringMatching(/nested too deeply/) })]);
  });

  it("input guard - jsonSize is at least the JSON's real byte size", () => {
    for (const value of [{ a: "é".repeat(1000) }, { b: ['\u0001"\\', 12.5, true, null] }, { c: { d: "😀" } }, []]) {
      expect(jsonSize(value)).toBeGreaterThanOrEqual(Buffer.byteLength(JSON.stringify(value)));
    }
    expect(jsonSize({ a: "x".repeat(100_000) })).toBeLessThan(100_100);
  });

  it("input guard - a PostgreSQL data error (SQLSTATE class 22) becomes 400 naming nothing internal; others pass through", () => {
    const nul = Object.assign(new Error('invalid byte sequence for encoding "UTF8": 0x00'), { code: "22021" });
    expect(fromDataError(nul)).toMatchObject({ code: 400, type: "VALIDATION_FAILED" });
    expect(JSON.stringify(fromDataError(nul))).not.toMatch(/UTF8|0x00/);
    const down = Object.assign(new Error("connection refused"), { code: "ECONNREFUSED" });
    expect(fromDataError(down)).toBe(down);
  });
});

describe("gateway http - answers written straight to the socket", () => {
  it.each([
    ["HPE_HEADER_OVERFLOW", "HEADERS_TOO_LARGE"],
    ["ERR_HTTP_REQUEST_TIMEOUT", "REQUEST_TIMEOUT"],
    ["HPE_INVALID_METHOD", "MALFORMED_REQUEST"],
    ["HPE_UNEXPECTED_CONTENT_LENGTH", "MALFORMED_REQUEST"],
    [undefined, "MALFORMED_REQUEST"],
  ])("gateway http - parser error %s is %s", (nodeCode, code) => {
    expect(classifyClientError(nodeCode)?.code).toBe(code);
  });

  it("gateway http - a client that is gone gets nothing", () => {
    expect(classifyClientError("ECONNRESET")).toBeNull();
  });

  it("gateway http - the raw response is complete HTTP with the contract's body, its length and the request id", () => {
    const raw = rawErrorResponse("HEADERS_TOO_LARGE", "Too big", "req-1", { "Retry-After": "1" });
    const [head, body] = raw.split("\r\n\r\n");
    expect(head.split("\r\n")[0]).toBe("HTTP/1.1 431 Request Header Fields Too Large");
    expect(head).toContain("X-Request-Id: req-1");
    expect(head).toContain("Connection: close");
    expect(head).toContain("Retry-After: 1");
    expect(head).toContain(`Content-Length: ${Buffer.byteLength(body)}`);
    expect(JSON.parse(body)).toEqual({ error: { code: "HEADERS_TOO_LARGE", message: "Too big", details: null } });
  });
});

describe("gateway errors - bodies that are not what they claim", () => {
  it("gateway errors - a zlib failure (Content-Encoding the body does not match), re-wrapped by moleculer-web, is 400 INVALID_JSON", () => {
    const wrapped = { name: "MoleculerError", message: "incorrect header check", code: "Z_DATA_ERROR" };
    expect(toPublicError(wrapped, "r")).toMatchObject({ status: 400, internal: false, body: { error: { code: "INVALID_JSON" } } });
    expect(JSON.stringify(toPublicError(wrapped, "r").body)).not.toMatch(/header check|Z_DATA/);
  });

  it("gateway errors - a body that is not UTF-8 is 400 INVALID_JSON", () => {
    expect(toPublicError({ name: "MoleculerError", code: 400, type: "entity.invalid.utf8" }, "r")).toMatchObject({
      status: 400,
      body: { error: { code: "INVALID_JSON" } },
    });
  });

  it("gateway errors - the OpenAPI document lists the errors any request may get, in the shared error shape", () => {
    const responses = (buildOpenApi([], { version: "1" }).components as any).responses;
    const codes = Object.values(responses).map((r: any) => r.content["application/json"].schema.allOf[1].properties.error.properties.code.enum[0]);
    expect(codes).toEqual(
      expect.arrayContaining(["MALFORMED_REQUEST", "REQUEST_TIMEOUT", "HEADERS_TOO_LARGE", "VALIDATION_FAILED", "PAYLOAD_TOO_LARGE", "SERVICE_UNAVAILABLE"]),
    );
    expect(responses.TooManyConnections.headers["Retry-After"]).toBeDefined();
    for (const r of Object.values(responses) as any[]) expect(r.headers["X-Request-Id"]).toBeDefined();
  });
});

describe("gpu-scheduler batching - one bad item fails alone", () => {
  it("gpu-scheduler batching - a batch failing for one item is retried item by item: the others succeed", async () => {
    const batches: number[][] = [];
    const batcher = new Batcher<number, number>(
      async (items) => {
        batches.push(items);
        if (items.includes(13)) throw Object.assign(new Error("bad value"), { code: "22021" });
        return items.map((i) => i * 2);
      },
      { maxBatch: 100, maxInFlight: 1, itemError: fromDataError },
    );
    const outcomes = await Promise.allSettled([1, 2, 13, 4].map((i) => batcher.push(i)));
    expect(outcomes.map((o) => (o.status === "fulfilled" ? o.value : "rejected"))).toEqual([2, 4, "rejected", 8]);
    expect((outcomes[2] as PromiseRejectedResult).reason).toMatchObject({ code: 400 });
    expect(batches[0]).toEqual([1, 2, 13, 4]);
    expect(batches.slice(1).sort()).toEqual([[1], [13], [2], [4]]);
  });

  it("gpu-scheduler batching - an error of every item (database down) reaches every pusher as it is", async () => {
    const down = new Error("connection refused");
    const batcher = new Batcher<number, number>(async () => Promise.reject(down), { maxBatch: 10, maxInFlight: 1, itemError: fromDataError });
    const outcomes = await Promise.allSettled([1, 2].map((i) => batcher.push(i)));
    expect(outcomes.map((o) => (o as PromiseRejectedResult).reason)).toEqual([down, down]);
  });
});

describe("gpu-scheduler node labels - clients never see a node id", () => {
  // Asserted: columns other areas add to JobRow play no part in labels.
  const row = (over: Partial<JobRow>): JobRow =>
    ({
      id: "9a4c1f6e-8a51-4c8e-9d1e-0d5f0c6f1a2b",
      client_id: "c",
      spec: { command: "true" },
      gpu_type: null,
      status: "failed",
      node_id: "gpu-host-7.example.internal-4242",
      gpu_uuid: "g",
      gpu_name: "NVIDIA GeForce RTX 3060",
      holding: false,
      created_at: new Date(0),
      started_at: new Date(0),
      completed_at: new Date(1000),
      exit_code: null,
      output: null,
      error_message: "GPU node gpu-host-7.example.internal-4242 was lost (no heartbeat for 10 s)",
      ...over,
    }) as JobRow;

  it("gpu-scheduler node labels - stable, opaque, keyed: the same id gives one label, another secret another", () => {
    const label = nodeLabel("gpu-host-7-4242", "secret");
    expect(label).toMatch(/^node-[0-9a-f]{8}$/);
    expect(nodeLabel("gpu-host-7-4242", "secret")).toBe(label);
    expect(nodeLabel("gpu-host-7-4243", "secret")).not.toBe(label);
    expect(nodeLabel("gpu-host-7-4242", "other")).not.toBe(label);
  });

  it("gpu-scheduler node labels - a node-lost error message names the label, not the host", () => {
    const detail = toJobDetail(row({}), new Date(2000), (id) => nodeLabel(id, "s"), 3600);
    expect(detail.errorMessage).toBe(`GPU node ${nodeLabel("gpu-host-7.example.internal-4242", "s")} was lost (no heartbeat for 10 s)`);
    expect(JSON.stringify(detail)).not.toContain("gpu-host-7");
    expect(toJobDetail(row({ error_message: "exit code 1" }), new Date(2000), (id) => nodeLabel(id, "s"), 3600).errorMessage).toBe("exit code 1");
  });
});
