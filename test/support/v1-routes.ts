/**
 * The gateway's /v1 aliases as its settings declare them ("METHOD /v1/path/{param}"), which the OpenAPI
 * tests require documented; and the document of those routes alone (as the generator builds it,
 * no services), with an ajv that checks values against its schemas.
 */
import Ajv2020 from "ajv/dist/2020";
import addFormats from "ajv-formats";
import GatewayService from "../../services/api-gateway/api-gateway.service";
import { buildOpenApi, LiveRoute, OpenApiDocument } from "../../services/api-gateway/openapi/generator";

type Route = { path: string; aliases?: Record<string, string> };

export function v1Routes(): string[] {
  const routes = (GatewayService.settings as { routes: Route[] }).routes;
  // moleculer-web's `:id` is OpenAPI's `{id}`.
  return routes
    .filter((r) => r.path === "/v1")
    .flatMap((r) => Object.keys(r.aliases ?? {}).map((k) => k.replace(/^(\S+) \//, "$1 /v1/").replace(/:([A-Za-z0-9_]+)/g, "{$1}")));
}

export type V1Document = {
  doc: OpenApiDocument;
  /** Whether `value` fits `#/components/schemas/<schema>`; `why()` says what did not. */
  fits(schema: string, value: unknown): boolean;
  why(): string;
};

export function v1Document(): V1Document {
  const routes: LiveRoute[] = v1Routes().map((key) => {
    const [method, path] = key.split(" ");
    return { method, path, action: { name: `inference.${path}`, rest: true } };
  });
  const doc = buildOpenApi(routes, { version: "test" });
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats(ajv);
  ajv.addSchema(doc, "openapi.json");
  return {
    doc,
    fits: (schema, value) => ajv.validate(`openapi.json#/components/schemas/${schema}`, value) as boolean,
    why: () => ajv.errorsText(ajv.errors),
  };
}

/** Whether `parse` takes `body` (a parser throws its 400). */
export function parses(parse: (body: unknown) => unknown, body: unknown): boolean {
  try {
    parse(body);
    return true;
  } catch {
    return false;
  }
}
