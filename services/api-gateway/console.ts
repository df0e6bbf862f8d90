/**
 * The web console: `GET /console` and its static files (plain JS modules and CSS from the
 * checkout's console/ folder, or dist/console in the image; `npm run build` copies it). Nothing
 * comes from elsewhere and the page's CSP allows this origin only, inline scripts and styles none.
 */
import fs from "fs";
import type { IncomingMessage, ServerResponse } from "http";
import path from "path";
import { STATIC_ROUTE } from "./docs";

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
};

/** No inline script or style, no other origin, no framing; fetches (API, streams) same-origin only. */
export const CONSOLE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; font-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const HEADERS = {
  "Content-Security-Policy": CONSOLE_CSP,
  "X-Content-Type-Options": "nosniff",
  "Referrer-Policy": "no-referrer",
  "Cache-Control": "no-cache",
};

/** Only plain names of files that exist in the folder: no path is ever built from the request. */
const FILE_NAME = /^[a-z0-9-]+\.(html|js|css|svg)$/;

/** The folder: console/ beside services/ in the checkout (services/api-gateway/…) and in dist/. */
export function consoleDir(): string {
  return path.resolve(__dirname, "../../console");
}

/** The console's files, read once: a name → [type, bytes] table. */
export function loadConsoleFiles(dir = consoleDir()): Map<string, [string, Buffer]> {
  const files = new Map<string, [string, Buffer]>();
  if (!fs.existsSync(dir)) return files;
  for (const name of fs.readdirSync(dir)) {
    if (!FILE_NAME.test(name)) continue;
    files.set(name, [TYPES[path.extname(name)], fs.readFileSync(path.join(dir, name))]);
  }
  return files;
}

function send(res: ServerResponse, status: number, type: string, body: string | Buffer) {
  res.writeHead(status, { "Content-Type": type, "Content-Length": String(Buffer.byteLength(body)), ...HEADERS });
  res.end(body);
}

function notFound(res: ServerResponse) {
  send(res, 404, "application/json; charset=utf-8", JSON.stringify({ error: { code: "NOT_FOUND", message: "Route not found", details: null } }));
}

/** A moleculer-web route of its own (a route with the docs' path "/" would replace the docs). */
export function consoleRoute() {
  let files: Map<string, [string, Buffer]> | undefined;
  const serve = (res: ServerResponse, name: string) => {
    files ??= loadConsoleFiles();
    const file = files.get(name);
    if (!file) return notFound(res);
    send(res, 200, file[0], file[1]);
  };
  return {
    path: "/console",
    ...STATIC_ROUTE,
    aliases: {
      "GET /"(_req: IncomingMessage, res: ServerResponse) {
        serve(res, "index.html");
      },
      "GET /:file"(req: IncomingMessage & { $params?: { file?: string } }, res: ServerResponse) {
        serve(res, req.$params?.file ?? "");
      },
    },
  };
}
