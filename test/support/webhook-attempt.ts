/** One attempt of the real WebhookSender, its queue a stand-in holding one row, for tests of what it refuses. */
import { WebhookSender } from "../../services/gpu-scheduler/webhooks/webhook-sender";
import type { SenderPorts } from "../../services/gpu-scheduler/webhooks/webhook-sender";
import type { DeliveryRow, WebhooksRepository } from "../../services/gpu-scheduler/webhooks/webhooks.repository";
import { waitFor } from "./platform";

export type Recorded = { ok: boolean; statusCode: number | null; error: string | null; retryInS: number | null };

/** Delivers one row for https://hooks.example.com/x, whose DNS answers `address`, through `post`: what the sender recorded. */
export async function attemptTo(address: string, post: SenderPorts["post"]): Promise<Recorded> {
  const recorded: Recorded[] = [];
  const row: DeliveryRow = { id: "d1", client_id: "c", job_id: "j", type: "job.completed", url: "https://hooks.example.com/x", attempts: 1 };
  let claimed = false;
  const repo = {
    claim: async () => (claimed ? [] : ((claimed = true), [row])),
    record: async (_id: string, outcome: Recorded) => void recorded.push(outcome),
  } as unknown as WebhooksRepository;
  const sender = new WebhookSender(
    {
      repo,
      detail: async () => ({ id: "j" }) as never,
      secret: async () => `whsec_${Buffer.alloc(32, 1).toString("base64")}`,
      lookup: async () => [{ address, family: address.includes(":") ? 6 : 4 }],
      post,
      now: () => new Date(),
    },
    { allowPrivate: false, retryDelaysS: [1], timeoutMs: 1000, pollMs: 60_000, concurrency: 50, accountConcurrency: 4 },
    { info: () => undefined, warn: () => undefined } as never,
  );
  sender.start();
  try {
    await waitFor(() => recorded.length === 1, { message: "the attempt recorded" });
  } finally {
    await sender.stop();
  }
  return recorded[0];
}
