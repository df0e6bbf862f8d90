/**
 * A provider stand-in in its own process for bench:inference (STANDIN=openai: OpenAI's wire
 * format, else Ollama's): prints its URL, then takes script changes as JSON lines on stdin
 * (`{"delayMs": 0}`), answering each with "ok". Two lines are not scripts: `{"tally": MARK}` counts
 * requests whose prompt holds MARK as batch lines and the others as interactive (answered "ok"), and
 * `{"report": true}` answers with one JSON line: how many batch lines were in flight when each
 * interactive request arrived since the last report.
 */
import readline from "readline";
import { OllamaStandin, OpenAiStandin } from "../test/support/provider-standins";
import type { Arrival } from "../test/support/standin-server";

async function main() {
  const standin = await (process.env.STANDIN === "openai" ? new OpenAiStandin() : new OllamaStandin()).start();
  // A long benchmark must not grow the request log without bound.
  setInterval(() => standin.requests.splice(0), 1000).unref();
  let seen: number[] = [];
  standin.on("arrival", (a: Arrival) => a.kind === "interactive" && seen.push(a.inFlight.batch ?? 0));
  readline.createInterface({ input: process.stdin }).on("line", (line) => {
    const order = JSON.parse(line);
    if (typeof order.tally === "string") {
      const mark: string = order.tally;
      standin.classify = (r) =>
        !r.path.endsWith("/chat/completions") && r.path !== "/api/chat" ? undefined : JSON.stringify(r.body?.messages).includes(mark) ? "batch" : "interactive";
    } else if (order.report) {
      const sorted = seen.sort((x, y) => x - y);
      const mean = sorted.reduce((s, v) => s + v, 0) / (sorted.length || 1);
      process.stdout.write(
        `${JSON.stringify({ interactive: sorted.length, mean, p50: sorted[Math.floor(sorted.length / 2)] ?? 0, max: sorted.at(-1) ?? 0 })}\n`,
      );
      seen = [];
      return;
    } else standin.set(order);
    process.stdout.write("ok\n");
  });
  process.stdin.once("end", () => process.exit(0));
  process.stdout.write(`${JSON.stringify({ url: standin.url })}\n`);
}

void main();
