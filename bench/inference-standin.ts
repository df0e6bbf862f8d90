/**
 * A provider stand-in in its own process for bench:inference (STANDIN=openai: OpenAI's wire
 * format, else Ollama's): prints its URL, then takes script changes as JSON lines on stdin
 * (`{"delayMs": 0}`), answering each with "ok".
 */
import readline from "readline";
import { OllamaStandin, OpenAiStandin } from "../test/support/provider-standins";

async function main() {
  const standin = await (process.env.STANDIN === "openai" ? new OpenAiStandin() : new OllamaStandin()).start();
  // A long benchmark must not grow the request log without bound.
  setInterval(() => standin.requests.splice(0), 1000).unref();
  readline.createInterface({ input: process.stdin }).on("line", (line) => {
    standin.set(JSON.parse(line));
    process.stdout.write("ok\n");
  });
  process.stdin.once("end", () => process.exit(0));
  process.stdout.write(`${JSON.stringify({ url: standin.url })}\n`);
}

void main();
