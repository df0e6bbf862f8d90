/** One ioredis connection per (process, URL), shared by the services that need Redis. */
import Redis from "ioredis";

const clients = new Map<string, { client: Redis; users: number }>();

export function acquireRedis(url: string): Redis {
  const entry = clients.get(url);
  if (entry) {
    entry.users += 1;
    return entry.client;
  }
  const client = new Redis(url, { maxRetriesPerRequest: 2, enableOfflineQueue: true, lazyConnect: false });
  client.on("error", () => undefined); // ioredis reconnects by itself; callers see failed commands
  clients.set(url, { client, users: 1 });
  return client;
}

export async function releaseRedis(url: string): Promise<void> {
  const entry = clients.get(url);
  if (!entry) return;
  entry.users -= 1;
  if (entry.users > 0) return;
  clients.delete(url);
  await entry.client.quit().catch(() => entry.client.disconnect());
}
