import { Webhook } from "standardwebhooks";
import { DEFAULT_RETRY_DELAYS_S, retryDelayS, signedHeaders } from "../../services/gpu-scheduler/webhooks/webhook-delivery";
import { parseSchedulerSettings } from "../../services/gpu-scheduler/settings";
import { isPrivateAddress, Lookup, parseWebhookUrl, resolveTarget } from "../../services/gpu-scheduler/webhooks/webhook-target";
import { attemptTo } from "../support/webhook-attempt";

describe("gpu webhooks - which addresses a webhook may reach", () => {
  test.each([
    ["127.0.0.1", true],
    ["127.255.0.9", true],
    ["10.0.0.1", true],
    ["172.16.5.4", true],
    ["172.32.0.1", false],
    ["192.168.0.1", true],
    ["169.254.169.254", true],
    ["100.64.0.1", true],
    ["0.0.0.0", true],
    ["224.0.0.1", true],
    ["255.255.255.255", true],
    ["::1", true],
    ["::", true],
    ["fe80::1", true],
    ["fc00::1", true],
    ["fd12:3456::1", true],
    ["ff02::1", true],
    ["::ffff:127.0.0.1", true],
    ["::ffff:7f00:1", true],
    ["64:ff9b::10.0.0.1", true],
    ["64:ff9b::8.8.8.8", false],
    ["64:ff9b:1::8.8.8.8", true],
    ["::7f00:1", true],
    ["::ffff:0:7f00:1", true],
    ["2002:7f00:1::", true],
    ["2002:808:808::", true],
    ["2001::1", true],
    ["2001:db8::1", true],
    ["100::1", true],
    ["fec0::1", true],
    ["3fff::1", true],
    ["198.51.100.7", true],
    ["240.0.0.1", true],
    ["::ffff:8.8.8.8", false],
    ["8.8.8.8", false],
    ["93.184.216.34", false],
    ["2606:4700::1111", false],
    ["not-an-address", true],
  ])("gpu webhooks - %s private: %s", (address, expected) => {
    expect(isPrivateAddress(address)).toBe(expected);
  });

  test.each([
    ["https://hooks.example.com/x", true],
    ["http://hooks.example.com:8080/x?y=1", true],
    ["ftp://hooks.example.com/x", false],
    ["file:///etc/passwd", false],
    ["javascript:alert(1)", false],
    ["//hooks.example.com/x", false],
    ["hooks.example.com/x", false],
    [`https://example.com/${"a".repeat(2030)}`, false],
  ])("gpu webhooks - %s is a webhook URL: %s", (raw, ok) => {
    expect(parseWebhookUrl(raw).ok).toBe(ok);
  });

  const resolvesTo =
    (...addresses: string[]): Lookup =>
    async () =>
      addresses.map((address) => ({ address, family: address.includes(":") ? 6 : 4 }));

  test("gpu webhooks - a name is refused when any of its addresses is private, and connects to the checked one", async () => {
    expect(await resolveTarget("https://hooks.example.com/x", resolvesTo("93.184.216.34", "10.0.0.5"), false)).toMatchObject({ ok: false });
    expect(await resolveTarget("https://hooks.example.com/x", resolvesTo("93.184.216.34"), false)).toMatchObject({
      ok: true,
      address: "93.184.216.34",
      family: 4,
    });
    expect(await resolveTarget("https://hooks.example.com/x", resolvesTo("10.0.0.5"), true)).toMatchObject({ ok: true, address: "10.0.0.5" });
    const failing: Lookup = async () => Promise.reject(new Error("ENOTFOUND"));
    expect(await resolveTarget("https://nowhere.example/x", failing, false)).toMatchObject({ ok: false, reason: expect.stringContaining("resolved") });
  });
});

describe("gpu webhooks - delivery concurrency settings", () => {
  test("gpu webhooks - 50 in flight per replica and 4 per account by default; set ones are read", () => {
    expect(parseSchedulerSettings({}).webhooks).toMatchObject({ concurrency: 50, accountConcurrency: 4 });
    const set = parseSchedulerSettings({ WEBHOOK_CONCURRENCY: "8", WEBHOOK_ACCOUNT_CONCURRENCY: "2" }).webhooks;
    expect(set).toMatchObject({ concurrency: 8, accountConcurrency: 2 });
  });

  test.each(["0", "-1", "1.5", "many"])("gpu webhooks - WEBHOOK_ACCOUNT_CONCURRENCY or WEBHOOK_CONCURRENCY %s refuses to start", (raw) => {
    expect(() => parseSchedulerSettings({ WEBHOOK_ACCOUNT_CONCURRENCY: raw })).toThrow(/WEBHOOK_ACCOUNT_CONCURRENCY/);
    expect(() => parseSchedulerSettings({ WEBHOOK_CONCURRENCY: raw })).toThrow(/WEBHOOK_CONCURRENCY/);
  });
});

describe("gpu webhooks - signatures and retries", () => {
  test("gpu webhooks - signedHeaders verify with the standardwebhooks reference library, and only with their secret", () => {
    const secret = `whsec_${Buffer.alloc(32, 3).toString("base64")}`;
    const body = JSON.stringify({ type: "job.completed", timestamp: new Date().toISOString(), data: { id: "j" } });
    const headers = signedHeaders(secret, "msg-1", Math.floor(Date.now() / 1000), body);
    expect(headers["webhook-signature"]).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);
    expect(new Webhook(secret).verify(body, headers)).toMatchObject({ data: { id: "j" } });
    expect(() => new Webhook(`whsec_${Buffer.alloc(32, 4).toString("base64")}`).verify(body, headers)).toThrow();
    expect(() => new Webhook(secret).verify(body.replace('"j"', '"k"'), headers)).toThrow();
  });

  test("gpu webhooks - the default schedule retries for at least 24 hours, with growing waits, then gives up", () => {
    expect(DEFAULT_RETRY_DELAYS_S.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(24 * 3600);
    for (let i = 1; i < DEFAULT_RETRY_DELAYS_S.length; i++) expect(DEFAULT_RETRY_DELAYS_S[i]).toBeGreaterThanOrEqual(DEFAULT_RETRY_DELAYS_S[i - 1]);
    expect(retryDelayS(1, DEFAULT_RETRY_DELAYS_S)).toBe(5);
    expect(retryDelayS(DEFAULT_RETRY_DELAYS_S.length + 1, DEFAULT_RETRY_DELAYS_S)).toBeNull();
  });

  test("gpu webhooks - DNS rebinding: a host that resolves privately at delivery is refused there, and nothing is sent", async () => {
    const post = jest.fn();
    expect(await attemptTo("169.254.169.254", post)).toMatchObject({ ok: false, statusCode: null, error: expect.stringContaining("refused"), retryInS: 1 });
    expect(post).not.toHaveBeenCalled();
  });
});
