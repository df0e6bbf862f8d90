/**
 * A loopback TCP proxy a test can cut: `stop()` closes the listener and every open connection,
 * as if the server behind it went away; `start()` listens again on the same port. Lets a test
 * take PostgreSQL or NATS "down" for one platform without touching the shared servers.
 */
import net from "net";

export type TcpProxy = { port: number; start(): Promise<void>; stop(): Promise<void> };

export async function startTcpProxy(targetHost: string, targetPort: number): Promise<TcpProxy> {
  const sockets = new Set<net.Socket>();
  let server: net.Server | null = null;
  let port = 0;

  const listen = () =>
    new Promise<void>((resolve, reject) => {
      const s = net.createServer((client) => {
        const upstream = net.connect({ host: targetHost, port: targetPort });
        for (const sock of [client, upstream]) {
          sockets.add(sock);
          sock.on("close", () => sockets.delete(sock));
          sock.on("error", () => {
            client.destroy();
            upstream.destroy();
          });
        }
        client.pipe(upstream);
        upstream.pipe(client);
      });
      s.once("error", reject);
      s.listen(port, "127.0.0.1", () => {
        port = (s.address() as net.AddressInfo).port;
        server = s;
        resolve();
      });
    });

  await listen();
  return {
    get port() {
      return port;
    },
    start: () => listen(),
    stop: () =>
      new Promise<void>((resolve) => {
        const s = server;
        server = null;
        for (const sock of sockets) sock.destroy();
        sockets.clear();
        if (!s) return resolve();
        s.close(() => resolve());
      }),
  };
}
