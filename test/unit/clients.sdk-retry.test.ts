/** The SDK's retry policy and its base URLs, as tables: no network. */
import { backoffMs, buildUrl, RETRY_DEFAULTS, retryAfterMs, shouldRetry } from "../../clients/sdk/src";

describe("clients sdk retry - which failures are tried again", () => {
  const cases: Array<[string, string, boolean, number | undefined, boolean]> = [
    ["a GET with no answer", "get", false, undefined, true],
    ["a POST with no answer", "post", false, undefined, false],
    ["a POST with an Idempotency-Key and no answer", "post", true, undefined, true],
    ["a GET answered 502", "get", false, 502, true],
    ["a DELETE answered 504", "delete", false, 504, true],
    ["a POST answered 502", "post", false, 502, false],
    ["a POST answered 429", "post", false, 429, true],
    ["a POST answered 503", "post", false, 503, true],
    ["a GET answered 404", "get", false, 404, false],
    ["a GET answered 400", "get", false, 400, false],
  ];
  test.each(cases)("clients sdk retry - %s", (_, method, idempotent, status, expected) => {
    expect(shouldRetry(method, idempotent, status)).toBe(expected);
  });
});

describe("clients sdk retry - how long to wait", () => {
  test("clients sdk retry - Retry-After as seconds or a date; unreadable is none", () => {
    expect(retryAfterMs("2")).toBe(2000);
    expect(retryAfterMs("0.5")).toBe(500);
    expect(retryAfterMs(new Date(10_000).toUTCString(), 4_000)).toBe(6_000);
    expect(retryAfterMs("soon")).toBeUndefined();
    expect(retryAfterMs(null)).toBeUndefined();
  });

  test("clients sdk retry - full jitter under a doubling ceiling; Retry-After wins, capped", () => {
    const opts = { ...RETRY_DEFAULTS, initialDelayMs: 100, maxDelayMs: 1000 };
    expect([0, 1, 2, 3, 4].map((n) => backoffMs(n, opts, undefined, () => 1))).toEqual([100, 200, 400, 800, 1000]);
    expect(backoffMs(3, opts, undefined, () => 0)).toBe(0);
    expect(backoffMs(0, opts, 700, () => 1)).toBe(700);
    expect(backoffMs(0, opts, 60_000, () => 1)).toBe(1000);
  });
});

describe("clients sdk base url - a path prefix is kept", () => {
  test.each([
    ["http://h:1", "http://h:1/api/auth/me"],
    ["http://h:1/", "http://h:1/api/auth/me"],
    ["http://h:1/ci", "http://h:1/ci/api/auth/me"],
    ["https://h/a/b/", "https://h/a/b/api/auth/me"],
  ])("clients sdk base url - %s", (base, expected) => {
    expect(buildUrl(base, "/api/auth/me")).toBe(expected);
  });
});
