/** The gateway's /v1 aliases as its settings declare them ("METHOD /v1/path"): what the OpenAPI tests require documented. */
import GatewayService from "../../services/api-gateway/api-gateway.service";

type Route = { path: string; aliases?: Record<string, string> };

export function v1Routes(): string[] {
  const routes = (GatewayService.settings as { routes: Route[] }).routes;
  return routes.filter((r) => r.path === "/v1").flatMap((r) => Object.keys(r.aliases ?? {}).map((k) => k.replace(/^(\S+) \//, "$1 /v1/")));
}
