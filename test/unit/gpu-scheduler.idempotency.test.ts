import { canonicalJson, checkIdempotencyKey, requestHash } from "../../services/gpu-scheduler/api/idempotency";

describe("gpu-scheduler idempotency - the key's rule", () => {
  it.each([
    ["a uuid", "5b0e4c1e-1c2d-4f7a-9a0b-3c4d5e6f7a8b"],
    ["one character", "x"],
    ["255 visible characters", "~".repeat(255)],
    ["punctuation", "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"],
  ])("gpu-scheduler idempotency - %s is a key", (_name, key) => {
    expect(checkIdempotencyKey(key)).toBe(key);
  });

  it.each([
    ["empty", ""],
    ["256 characters", "x".repeat(256)],
    ["a space", "a b"],
    ["a tab", "a\tb"],
    ["non-ASCII", "café"],
    ["a control character", "a\u0001b"],
  ])("gpu-scheduler idempotency - %s is 400 VALIDATION_FAILED naming the header", (_name, key) => {
    expect(() => checkIdempotencyKey(key)).toThrow(
      expect.objectContaining({ code: 400, type: "VALIDATION_FAILED", data: [expect.objectContaining({ field: "Idempotency-Key" })] }),
    );
  });

  it("gpu-scheduler idempotency - no header is no key", () => {
    expect(checkIdempotencyKey(undefined)).toBeUndefined();
  });
});

describe("gpu-scheduler idempotency - the request's fingerprint", () => {
  it("gpu-scheduler idempotency - key order does not matter, at any depth; absent and undefined are the same", () => {
    expect(canonicalJson({ b: 1, a: { d: [1, { y: 2, x: 1 }], c: null } })).toBe('{"a":{"c":null,"d":[1,{"x":1,"y":2}]},"b":1}');
    expect(requestHash({ command: "x", gpuType: "any", env: { B: "2", A: "1" } })).toBe(requestHash({ env: { A: "1", B: "2" }, gpuType: "any", command: "x" }));
    expect(requestHash({ command: "x", gpuType: undefined })).toBe(requestHash({ command: "x" }));
  });

  it.each([
    ["another value", { command: "y" }],
    ["another field", { command: "x", gpuType: "any" }],
    ["null instead of absent", { command: "x", gpuType: null }],
    ["another type", { command: ["x"] }],
  ])("gpu-scheduler idempotency - %s is another request", (_name, other) => {
    expect(requestHash(other)).not.toBe(requestHash({ command: "x" }));
  });
});
