/** JSON log lines: fields, errors, and the request id of the action being served. */
import { ServiceBroker } from "moleculer";
import { jsonLineFormatter, RequestScopeMiddleware } from "../../lib/logging";

describe("ops - JSON log lines", () => {
  let broker: ServiceBroker;
  let lines: Array<Record<string, unknown>>;
  const capture = (...args: unknown[]) => lines.push(JSON.parse(String(args[0])));

  beforeAll(async () => {
    lines = [];
    for (const level of ["log", "info", "warn", "error"] as const) jest.spyOn(console, level).mockImplementation(capture);
    broker = new ServiceBroker({
      nodeID: "log-test",
      logger: { type: "Console", options: { level: "info", formatter: jsonLineFormatter, colors: false } },
      middlewares: [RequestScopeMiddleware],
    });
    broker.createService({
      name: "echo",
      actions: {
        async work(this: { logger: { info(...a: unknown[]): void } }) {
          await new Promise((r) => setImmediate(r)); // the scope must survive awaits
          this.logger.info("inside the action");
          return true;
        },
      },
    });
    await broker.start();
  });
  afterAll(async () => {
    await broker.stop();
    jest.restoreAllMocks();
  });

  beforeEach(() => {
    lines = [];
  });

  const cases: Array<[string, () => Promise<unknown> | void, Record<string, unknown>, string[]]> = [
    [
      "a line logged inside an action carries its request id",
      () => broker.call("echo.work", {}, { requestID: "req-123" }),
      { level: "info", message: "inside the action", requestId: "req-123", svc: "echo", nodeID: "log-test" },
      [],
    ],
    ["a line outside any request has no request id", () => broker.logger.info("plain"), { message: "plain", mod: "broker" }, ["requestId"]],
    [
      "a leading object becomes top-level fields",
      () => broker.logger.info({ requestId: "r-9", status: 201 }, "request"),
      { message: "request", requestId: "r-9", status: 201 },
      [],
    ],
    [
      "an error is described and its stack kept",
      () => broker.logger.error("failed:", new TypeError("boom")),
      { level: "error", message: "failed: TypeError: boom" },
      [],
    ],
  ];

  it.each(cases)("ops - %s", async (_name, act, expected, absent) => {
    await act();
    const line = lines.find((l) => l.message === expected.message);
    expect(line).toMatchObject(expected);
    expect(typeof line!.time).toBe("string");
    for (const key of absent) expect(line).not.toHaveProperty(key);
    if (expected.level === "error") expect(String(line!.stack)).toMatch(/^TypeError: boom\n\s+at /);
  });
});
