import { Errors } from "moleculer";
import { toPublicError } from "../../services/api-gateway/error-mapper";
import { apiError, rateLimited } from "../../lib/errors";
import { hashesBusy } from "../../services/auth/hash-gate";

const bodyParserError = (type: string, status: number) => Object.assign(new Error("raw parser text"), { type, status });

describe("gateway - error mapper", () => {
  const cases: Array<[string, unknown, number, string]> = [
    ["oversize body", bodyParserError("entity.too.large", 413), 413, "PAYLOAD_TOO_LARGE"],
    ["malformed JSON", bodyParserError("entity.parse.failed", 400), 400, "INVALID_JSON"],
    ["unsupported charset", bodyParserError("charset.unsupported", 415), 415, "UNSUPPORTED_MEDIA_TYPE"],
    [
      "validator error",
      new Errors.ValidationError("bad", "VALIDATION_ERROR", [{ field: "email", message: "bad e-mail", type: "email" }]),
      400,
      "VALIDATION_FAILED",
    ],
    ["catalogue error", apiError("EMAIL_TAKEN", "taken"), 409, "EMAIL_TAKEN"],
    ["service not found", new Errors.ServiceNotFoundError({ action: "auth.secret", nodeID: "node-7" }), 503, "SERVICE_UNAVAILABLE"],
    ["request timeout", new Errors.RequestTimeoutError({ action: "auth.me", nodeID: "node-7" }), 503, "SERVICE_UNAVAILABLE"],
    ["library 4xx", new Errors.MoleculerClientError("nope", 403, "SOME_LIB_TYPE"), 403, "FORBIDDEN"],
    ["plain Error with SQL", new Error('relation "auth.clients" does not exist'), 500, "INTERNAL"],
    ["non-error value", "boom", 500, "INTERNAL"],
  ];

  it.each(cases)("%s", (_name, err, status, code) => {
    const pub = toPublicError(err, "req-1");
    expect(pub.status).toBe(status);
    expect(pub.body.error.code).toBe(code);
    expect(typeof pub.body.error.message).toBe("string");
    expect(pub.body.error).toHaveProperty("details");
  });

  it("gateway - validation details are {field, message}", () => {
    const pub = toPublicError(new Errors.ValidationError("bad", "VALIDATION_ERROR", [{ field: "password", message: "too short", type: "stringMin" }]), "r");
    expect(pub.body.error.details).toEqual([{ field: "password", message: "too short" }]);
  });

  it("gateway - internal errors carry only the request id", () => {
    const pub = toPublicError(new Error("SELECT secret FROM x at host db-7:5432"), "req-42");
    expect(pub.internal).toBe(true);
    expect(JSON.stringify(pub.body)).not.toMatch(/SELECT|db-7|5432/);
    expect(pub.body.error.details).toEqual({ requestId: "req-42" });
  });

  it("gateway - unavailable services are not named", () => {
    const pub = toPublicError(new Errors.ServiceNotFoundError({ action: "gpu-scheduler.create", nodeID: "n1" }), "r");
    expect(JSON.stringify(pub.body)).not.toMatch(/gpu-scheduler|n1/);
  });

  it("gateway - a service shedding load (503) sets Retry-After", () => {
    const pub = toPublicError(hashesBusy(), "r");
    expect(pub.status).toBe(503);
    expect(pub.body.error.code).toBe("SERVICE_UNAVAILABLE");
    expect(pub.headers["Retry-After"]).toBe("1");
  });

  it("gateway - rate limit sets Retry-After", () => {
    const pub = toPublicError(rateLimited(12.2), "r");
    expect(pub.status).toBe(429);
    expect(pub.headers["Retry-After"]).toBe("13");
  });
});
