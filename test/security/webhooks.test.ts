/**
 * Attack replays on webhooks (security issue, findings 6 and 7): webhook URLs in special-purpose
 * IPv6 (and IPv4) forms, refused at submission through the real platform and at delivery by the
 * real sender (its DNS answering with them); and one account's endpoint that accepts and never
 * answers, which must not hold up another account's delivery. Network targets are loopback only.
 */
import { mkdtempSync, rmSync } from "fs";
import http from "http";
import type { AddressInfo, Socket } from "net";
import os from "os";
import path from "path";
import { gpuTestUser, http as call, sandboxedGpuEnv, startTestPlatform, TestPlatform, waitFor } from "../support/platform";
import { attemptTo } from "../support/webhook-attempt";
import { Receiver, startReceiver } from "../support/webhook-receiver";

const SERVICES = ["api-gateway", "auth", "gpu-scheduler", "gpu-node"];

/** Each form with the address a URL parser or a resolver hands over for it. */
const SPECIAL_TARGETS: Array<[string, string]> = [
  ["http://[::127.0.0.1]/hook", "::7f00:1"], // IPv4-compatible loopback
  ["http://[::ffff:0:7f00:1]/hook", "::ffff:0:7f00:1"], // IPv4-translated loopback
  ["http://[2002:7f00:1::]/hook", "2002:7f00:1::"], // 6to4 around 127.0.0.1
  ["http://[100::1]/hook", "100::1"], // discard-only
  ["http://[2001:db8::1]/hook", "2001:db8::1"], // documentation
  ["http://[2001::1]/hook", "2001::1"], // Teredo
  ["http://0.0.0.0/hook", "0.0.0.0"],
  ["http://100.64.0.1/hook", "100.64.0.1"], // carrier-grade NAT
  ["http://198.18.0.1/hook", "198.18.0.1"], // benchmarking
  ["http://240.0.0.1/hook", "240.0.0.1"], // reserved
  ["http://2130706433/hook", "127.0.0.1"], // decimal
  ["http://0x7f.1/hook", "127.0.0.1"], // hex and short
  ["http://0177.0.0.1/hook", "127.0.0.1"], // octal
];

const quiet = () => {
  for (const method of ["log", "warn", "error"] as const) jest.spyOn(console, method).mockImplementation(() => undefined);
};

describe("webhooks - special-purpose addresses refused (WEBHOOK_ALLOW_PRIVATE off)", () => {
  let platform: TestPlatform;
  let token: string;
  const work = mkdtempSync(path.join(os.tmpdir(), "webhooks-sec-"));

  beforeAll(async () => {
    quiet();
    platform = await startTestPlatform({ services: SERVICES, env: sandboxedGpuEnv(work, { WEBHOOK_ALLOW_PRIVATE: undefined as unknown as string }) });
    // No webhook secret: a build that let these through still could never send to them (the address
    // rule is checked first, and the message says which rule refused).
    token = await gpuTestUser(platform.baseUrl);
  });

  afterAll(async () => {
    await platform?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  test.each(SPECIAL_TARGETS)("webhooks - %s at submission is 400 VALIDATION_FAILED naming webhookUrl, and nothing is stored", async (url) => {
    const jobs = async () => (await call(platform.baseUrl, "GET", "/api/gpu/jobs", { token })).body.jobs.length;
    const before = await jobs();
    const res = await call(platform.baseUrl, "POST", "/api/gpu/jobs", { token, body: { command: "true", webhookUrl: url } });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe("VALIDATION_FAILED");
    expect(res.body.error.details).toEqual([expect.objectContaining({ field: "webhookUrl", message: expect.stringContaining("must not point to") })]);
    expect(await jobs()).toBe(before);
  });

  test.each(SPECIAL_TARGETS)("webhooks - at delivery, a name resolving to %s's address is refused and nothing is sent", async (_url, address) => {
    const post = jest.fn(async () => ({ ok: true, statusCode: 200, error: null }));
    expect(await attemptTo(address, post)).toMatchObject({ ok: false, error: expect.stringContaining("refused") });
    expect(post).not.toHaveBeenCalled();
  });
});

/** A loopback endpoint that accepts every connection and never answers; counts those open at once. */
async function startSilentEndpoint() {
  const sockets = new Set<Socket>();
  let mostOpen = 0;
  const server = http.createServer(() => undefined);
  server.on("connection", (socket: Socket) => {
    sockets.add(socket);
    mostOpen = Math.max(mostOpen, sockets.size);
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    open: () => sockets.size,
    mostOpen: () => mostOpen,
    close: () => {
      for (const socket of sockets) socket.destroy();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe("webhooks - one account's silent endpoint does not hold up another account's deliveries", () => {
  const PER_ACCOUNT = 4;
  let platform: TestPlatform;
  let receiver: Receiver;
  let silent: Awaited<ReturnType<typeof startSilentEndpoint>>;
  const work = mkdtempSync(path.join(os.tmpdir(), "webhooks-fair-"));
  // Loopback receivers allowed here; a failed attempt is retried only after the test.
  const env = sandboxedGpuEnv(work, {
    WEBHOOK_ALLOW_PRIVATE: "true",
    WEBHOOK_POLL_MS: "100",
    WEBHOOK_RETRY_DELAYS_S: "3600",
    WEBHOOK_ACCOUNT_CONCURRENCY: String(PER_ACCOUNT),
  });

  beforeAll(async () => {
    quiet();
    receiver = await startReceiver();
    silent = await startSilentEndpoint();
    platform = await startTestPlatform({ services: SERVICES, env });
  });

  afterAll(async () => {
    await silent?.close(); // its held attempts end at once, so the platform stops without waiting for them
    await platform?.stop();
    await receiver?.close();
    rmSync(work, { recursive: true, force: true });
  });

  test("webhooks - 150 deliveries to an endpoint that never answers: another account's delivery still arrives within 2 s", async () => {
    const base = platform.baseUrl;
    const [alice, bob] = [await gpuTestUser(base), await gpuTestUser(base)];
    for (const token of [alice, bob]) expect((await call(base, "POST", "/api/auth/webhook-secret", { token })).status).toBe(201);
    // The only card is busy, so every later job waits queued; cancelling one ends it (and queues its webhook) at once.
    const blocker = (await call(base, "POST", "/api/gpu/jobs", { token: alice, body: { command: "sleep 120" } })).body.id;
    await waitFor(async () => (await call(base, "GET", `/api/gpu/jobs/${blocker}`, { token: alice })).body.status === "running", { message: "running" });
    const queuedWithWebhook = async (token: string, webhookUrl: string) => {
      const res = await call(base, "POST", "/api/gpu/jobs", { token, body: { command: "true", webhookUrl } });
      expect(res.status).toBe(201);
      return res.body.id as string;
    };
    const cancel = async (token: string, id: string) => expect((await call(base, "POST", `/api/gpu/jobs/${id}/cancel`, { token })).status).toBe(200);

    const held: string[] = [];
    for (let i = 0; i < 150; i += 10) held.push(...(await Promise.all(Array.from({ length: 10 }, () => queuedWithWebhook(alice, silent.url)))));
    for (let i = 0; i < held.length; i += 10) await Promise.all(held.slice(i, i + 10).map((id) => cancel(alice, id)));
    await waitFor(() => silent.open() >= 1, { message: "the silent endpoint holding a delivery" });

    const id = await queuedWithWebhook(bob, receiver.url("/bob"));
    await cancel(bob, id);
    const cancelledAt = Date.now();
    await waitFor(() => receiver.to("/bob").length === 1, { timeoutMs: 40_000, message: "bob's delivery" });
    const delayMs = Date.now() - cancelledAt;
    expect(delayMs).toBeLessThan(2000);
    // Alice's silent endpoint holds at most her own slots.
    expect(silent.mostOpen()).toBeLessThanOrEqual(PER_ACCOUNT);
    expect(silent.mostOpen()).toBeGreaterThanOrEqual(1);
    await call(base, "POST", `/api/gpu/jobs/${blocker}/cancel`, { token: alice });
  });
});
