/**
 * The API reference: `GET /api/openapi.json` (generated on each request from the routes the
 * gateway serves right now; 503 while services of this process are still starting) and `GET /api/docs`, a Swagger UI page whose assets come from the
 * swagger-ui-dist package in node_modules (no CDN; the page's CSP allows this origin only).
 */
import fs from "fs";
import type { IncomingMessage, ServerResponse } from "http";
import path from "path";
import type { Service } from "moleculer";
import { buildOpenApi, LiveRoute } from "./openapi/generator";
import { documentPending } from "./readiness";

type Alias = { method: string; fullPath: string; action: string | null; handler: unknown };
type GatewayThis = Service & { aliases: Alias[] };
type ActionEntry = { name: string; action?: LiveRoute["action"] };

const ASSETS: Record<string, string> = {
  "swagger-ui.css": "text/css; charset=utf-8",
  "swagger-ui-bundle.js": "application/javascript; charset=utf-8",
  "favicon-32x32.png": "image/png",
  "favicon-16x16.png": "image/png",
};

const INIT_JS = `window.ui = SwaggerUIBundle({
  url: "/api/openapi.json",
  dom_id: "#swagger-ui",
  deepLinking: true,
  validatorUrl: null,
  presets: [SwaggerUIBundle.presets.apis],
  layout: "BaseLayout"
});
`;

const PAGE = `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>ci-platform API reference</title>
  <link rel="stylesheet" href="/api/docs/swagger-ui.css">
  <link rel="icon" type="image/png" href="/api/docs/favicon-32x32.png" sizes="32x32">
</head>
<body>
  <div id="swagger-ui"></div>
  <script src="/api/docs/swagger-ui-bundle.js"></script>
  <script src="/api/docs/init.js"></script>
</body>
</html>
`;

// Swagger UI sets inline styles and shows inline SVG/data images; scripts and fetches stay same-origin.
const CSP =
  "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; object-src 'none'; frame-ancestors 'none'";

let swaggerDir: string | undefined;
const assetCache = new Map<string, Buffer>();

function readAsset(name: string): Buffer {
  let data = assetCache.get(name);
  if (!data) {
    swaggerDir ??= path.dirname(require.resolve("swagger-ui-dist/package.json"));
    data = fs.readFileSync(path.join(swaggerDir, name));
    assetCache.set(name, data);
  }
  return data;
}

let version: string | undefined;
function platformVersion(): string {
  if (version) return version;
  // The nearest package.json: the repository's in development, /app/package.json in the image.
  for (let dir = __dirname; ; dir = path.dirname(dir)) {
    const file = path.join(dir, "package.json");
    if (fs.existsSync(file)) return (version = String(JSON.parse(fs.readFileSync(file, "utf8")).version ?? "0.0.0"));
    if (path.dirname(dir) === dir) return (version = "0.0.0");
  }
}

function send(res: ServerResponse, status: number, type: string, body: string | Buffer, headers: Record<string, string> = {}) {
  res.writeHead(status, { "Content-Type": type, "Content-Length": String(Buffer.byteLength(body)), ...headers });
  res.end(body);
}

/** The routes the gateway serves now, each with its action's definition from the registry. */
export function liveRoutes(gateway: GatewayThis): LiveRoute[] {
  const actions = new Map((gateway.broker.registry.getActionList({}) as unknown as ActionEntry[]).map((a) => [a.name, a.action]));
  const routes: LiveRoute[] = [];
  const seen = new Set<string>();
  for (const alias of gateway.aliases) {
    const methods = alias.method === "*" ? ["GET", "POST", "PUT", "PATCH", "DELETE"] : [alias.method.toUpperCase()];
    for (const method of methods) {
      const key = `${method} ${alias.fullPath}`;
      if (seen.has(key)) continue;
      seen.add(key);
      if (alias.action) {
        const def = actions.get(alias.action);
        routes.push({ method, path: alias.fullPath, action: { ...(def ?? {}), name: alias.action } });
      } else {
        routes.push({ method, path: alias.fullPath });
      }
    }
  }
  return routes;
}

export function openApiDocument(gateway: GatewayThis) {
  return buildOpenApi(liveRoutes(gateway), { version: platformVersion() });
}

/** A route of the gateway's own pages: public, no body, its aliases only. */
export const STATIC_ROUTE = { mappingPolicy: "restrict", authentication: false, authorization: false, bodyParsers: false, logging: false } as const;

/**
 * A moleculer-web route for the reference, beside the services' `/api` route. Its path is "/" with
 * full alias paths: moleculer-web replaces a route that has the same path as another.
 */
export function docsRoute() {
  return {
    path: "/",
    ...STATIC_ROUTE,
    aliases: {
      // `/` is the web console (a person opening the platform's address); the API lives under /api and /v1.
      "GET /"(_req: IncomingMessage, res: ServerResponse) {
        res.writeHead(302, { Location: "./console", "Content-Length": "0", "Cache-Control": "no-cache" });
        res.end();
      },
      "GET /api/openapi.json"(this: GatewayThis, _req: IncomingMessage, res: ServerResponse) {
        // Never a partial reference: until every service of this process is up and routed, 503.
        const pending = documentPending(this as never);
        if (pending) {
          const body = JSON.stringify({
            error: { code: "SERVICE_UNAVAILABLE", message: `The reference is not complete yet (${pending}): retry`, details: null },
          });
          return send(res, 503, "application/json; charset=utf-8", body, { "Retry-After": "1", "Cache-Control": "no-store" });
        }
        send(res, 200, "application/json; charset=utf-8", JSON.stringify(openApiDocument(this)), { "Cache-Control": "no-cache" });
      },
      "GET /api/docs"(_req: IncomingMessage, res: ServerResponse) {
        send(res, 200, "text/html; charset=utf-8", PAGE, { "Content-Security-Policy": CSP, "Cache-Control": "no-cache" });
      },
      "GET /api/docs/:file"(req: IncomingMessage & { $params?: { file?: string } }, res: ServerResponse) {
        const file = req.$params?.file ?? "";
        if (file === "init.js") return send(res, 200, ASSETS["swagger-ui-bundle.js"], INIT_JS, { "Cache-Control": "no-cache" });
        const type = Object.prototype.hasOwnProperty.call(ASSETS, file) ? ASSETS[file] : undefined;
        if (!type) {
          const body = JSON.stringify({ error: { code: "NOT_FOUND", message: "Route not found", details: null } });
          return send(res, 404, "application/json; charset=utf-8", body);
        }
        send(res, 200, type, readAsset(file), { "Cache-Control": "public, max-age=86400" });
      },
    },
  };
}
