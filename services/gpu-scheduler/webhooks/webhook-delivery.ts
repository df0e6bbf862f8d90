/**
 * Webhook delivery (Standard Webhooks, standardwebhooks.com): the signed request, the retry
 * schedule, and one attempt over HTTP to the address the SSRF check approved (webhook-target.ts).
 * The queue is webhook_deliveries (webhooks.repository.ts); WebhookSender drains it.
 */
import { createHmac } from "crypto";
import http from "http";
import https from "https";
import type { LookupFunction } from "net";

export type WebhookType = "job.completed" | "job.failed" | "job.cancelled";

/** The headers of a signed body: `webhook-signature: v1,<base64 HMAC-SHA256(key, id.timestamp.body)>` with key = base64-decoded part after `whsec_`. */
export function signedHeaders(secret: string, id: string, timestampS: number, body: string): Record<string, string> {
  const key = Buffer.from(secret.replace(/^whsec_/, ""), "base64");
  const signature = createHmac("sha256", key).update(`${id}.${timestampS}.${body}`).digest("base64");
  return { "webhook-id": id, "webhook-timestamp": String(timestampS), "webhook-signature": `v1,${signature}` };
}

/** WEBHOOK_RETRY_DELAYS_S's default: Standard Webhooks' schedule, 27.6 hours in all (at least 24 h of retries). */
export const DEFAULT_RETRY_DELAYS_S = [5, 300, 1800, 7200, 18000, 36000, 36000];

/** The wait after failed attempt `attempts` (1-based), or null when the retries are spent (pure). */
export function retryDelayS(attempts: number, delaysS: readonly number[]): number | null {
  return attempts >= 1 && attempts <= delaysS.length ? delaysS[attempts - 1] : null;
}

export type AttemptResult = { ok: boolean; statusCode: number | null; error: string | null };

const MAX_ERROR = 500;

/**
 * POSTs `body` to `url`, connecting to `address` (whatever the host's DNS says now), with TLS
 * checked against the URL's host name. A 2xx within `timeoutMs` delivers; nothing is followed.
 */
export function postOnce(url: URL, address: string, family: 4 | 6, headers: Record<string, string>, body: string, timeoutMs: number): Promise<AttemptResult> {
  const lookup: LookupFunction = (_host, opts, callback) => {
    if ((opts as { all?: boolean }).all) (callback as unknown as (e: null, a: Array<{ address: string; family: number }>) => void)(null, [{ address, family }]);
    else callback(null, address, family);
  };
  const client = url.protocol === "https:" ? https : http;
  return new Promise((resolve) => {
    let settled = false;
    const done = (result: AttemptResult) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(result);
    };
    const req = client.request(
      url,
      {
        method: "POST",
        lookup,
        agent: false,
        headers: { ...headers, "content-type": "application/json", "content-length": String(Buffer.byteLength(body)), "user-agent": "ci-platform-webhooks" },
      },
      (res) => {
        const code = res.statusCode ?? 0;
        res.resume(); // the answer's body is not read, only drained
        const ok = code >= 200 && code < 300;
        res.on("end", () => done({ ok, statusCode: code, error: ok ? null : `HTTP ${code}` }));
        res.on("error", () => done({ ok, statusCode: code, error: ok ? null : `HTTP ${code}` }));
      },
    );
    const timer = setTimeout(() => {
      req.destroy();
      done({ ok: false, statusCode: null, error: `no answer within ${timeoutMs / 1000} s` });
    }, timeoutMs);
    req.on("error", (err) => done({ ok: false, statusCode: null, error: err.message.slice(0, MAX_ERROR) }));
    req.end(body);
  });
}
