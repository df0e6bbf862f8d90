/**
 * Log lines. LOG_FORMAT=json (the default in production) writes one JSON object per line:
 * `{ time, level, message, requestId?, nodeID, ns, mod, svc, ...fields }`. The request id comes
 * from the action being served (an AsyncLocalStorage scope opened around every local action and
 * event), so a service's own `this.logger.info(...)` lines carry it without passing it around.
 */
import { AsyncLocalStorage } from "async_hooks";
import type { IncomingMessage, ServerResponse } from "http";
import type { Context, LoggerBindings, Middleware } from "moleculer";

type Scope = { requestId: string };

const scope = new AsyncLocalStorage<Scope>();

export const currentRequestId = (): string | undefined => scope.getStore()?.requestId;

/** Runs every local action and event handler inside its request's scope. */
export const RequestScopeMiddleware: Middleware = {
  localAction(handler: (ctx: Context) => Promise<unknown>) {
    return function inRequestScope(ctx: Context) {
      return ctx.requestID ? scope.run({ requestId: ctx.requestID }, () => handler(ctx)) : handler(ctx);
    } as typeof handler;
  },
  localEvent(handler: (ctx: Context) => Promise<unknown>) {
    return function inRequestScope(ctx: Context) {
      return ctx.requestID ? scope.run({ requestId: ctx.requestID }, () => handler(ctx)) : handler(ctx);
    } as typeof handler;
  },
} as unknown as Middleware;

const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v) && Object.getPrototypeOf(v) === Object.prototype;

function describe(arg: unknown, printArgs: (args: unknown[]) => unknown[]): string {
  if (arg instanceof Error) return `${arg.name}: ${arg.message}`;
  if (typeof arg === "string") return arg;
  return String(printArgs([arg])[0]);
}

/**
 * moleculer Console logger formatter. A plain object as first argument becomes top-level fields
 * (`logger.info({ requestId, status }, "request")`); an Error anywhere adds its stack.
 */
export function jsonLineFormatter(
  this: unknown,
  type: string,
  args: unknown[],
  bindings: LoggerBindings,
  { printArgs }: { printArgs: (args: unknown[]) => unknown[] },
): string[] {
  const fields = args.length > 1 && isPlainObject(args[0]) ? args[0] : {};
  const rest = fields === args[0] ? args.slice(1) : args;
  const error = rest.find((a): a is Error => a instanceof Error);
  const requestId = currentRequestId();
  return [
    JSON.stringify({
      time: new Date().toISOString(),
      level: type,
      message: rest.map((a) => describe(a, printArgs)).join(" "),
      ...(requestId ? { requestId } : {}),
      ...bindings,
      ...fields,
      ...(error?.stack ? { stack: error.stack } : {}),
    }),
  ];
}

type Logger = { info(...args: unknown[]): void };

/** Whether LOG_LEVEL lets info lines through (moleculer's levels, matched exactly as moleculer does). */
export const logsInfo = (level: string): boolean => level === "info" || level === "debug" || level === "trace";

/** One access-log line per HTTP request once its response is sent. */
export function logAccess(logger: Logger, req: IncomingMessage, res: ServerResponse, requestId: string): void {
  const started = process.hrtime.bigint();
  const path = (req.url ?? "").split("?")[0]; // read now: the router rewrites req.url later
  res.once("finish", () => {
    logger.info(
      {
        requestId,
        method: req.method,
        path,
        status: res.statusCode,
        durationMs: Math.round(Number(process.hrtime.bigint() - started) / 1e5) / 10,
      },
      "request",
    );
  });
}
