/**
 * bench:inference — what a gateway adds over calling the model provider directly. One provider
 * stand-in speaking OpenAI's wire format, in its own process; every path reaches that same
 * stand-in, and the passes alternate so drift on a shared machine hits them alike:
 *  - direct: the client calls the stand-in's /v1/chat/completions;
 *  - bare proxy: a node:http process that only forwards (bench/inference-bare-proxy.ts): what any
 *    extra process hop costs on this machine, the floor for a gateway;
 *  - portkey: Portkey's open-source AI gateway (bench/portkey.ts), same body;
 *  - platform /v1: gateway + auth + inference in one process (as `npm start` runs them), the
 *    OpenAI-compatible route, same body, with a JWT; and again with an API key (auth's answer
 *    cached by each gateway replica for at most 1 s: a rotated key stops within 1 s);
 *  - platform /api: the same platform's POST /api/models/infer, with a JWT.
 * Agents' requests (bench/inference-agents.ts), direct, Portkey and the platform: a chat
 * completion offering a function tool that the stand-in calls; Anthropic's POST /v1/messages.
 * Cases: concurrency 1 with instant answers (the overhead itself, least exposed to scheduling
 * noise), concurrency 1 (answers in 10–30 ms) and 50 (100–300 ms), non-streamed (whole answer)
 * and streamed (time to first byte); then capacity (instant answers, 50 concurrent). Paths take turns in short rounds (compare, bench/inference-measure.ts).
 * Goals (issue 34): /v1's added p50 ≤ 0.5 ms at concurrency 1 with instant answers, below Portkey's,
 * the same with an API key as with a JWT, and capacity ≥ 50 % of the bare proxy's. Each path also
 * reports the CPU its gateway's process spent per request (/proc; the figure load moves least).
 * BENCH_PROFILE_DIR writes a CPU profile of the platform's process there.
 */
import os from "os";
import { freePort, testDatabaseUrl, waitFor } from "../test/support/platform";
import { AgentPaths, messagesTargets, TOOL_CALL_SCRIPT, toolTargets, wrongAnswer } from "./inference-agents";
import { compare, Figures, once, Target } from "./inference-measure";
import { BenchPlatform, runBench, script, START_TIMEOUT_MS, startHelper, startPlatform, stopAll } from "./inference-platform";
import { installPortkey, Portkey, PORTKEY_VERSION, startPortkey } from "./portkey";

const REQUESTS = Number(process.env.BENCH_REQUESTS || 1200); // 50 concurrent, non-streamed, per path
const STREAMS = Number(process.env.BENCH_STREAMS || 500); // 50 concurrent, streamed, per path
const SERIAL = Number(process.env.BENCH_SERIAL || 150); // concurrency 1, per path
const SERIAL_INSTANT = Number(process.env.BENCH_SERIAL_INSTANT || 1000); // concurrency 1, instant answers, per path
const CAPACITY_REQUESTS = Number(process.env.BENCH_CAPACITY_REQUESTS || 3000);
const CONCURRENCY = 50;
const MODEL = "llama3.2:1b";

/** Issue 34: /v1's added p50 at concurrency 1 (instant answers), and its capacity against the bare proxy's. */
const GOAL_ADDED_MS = 0.5;
const GOAL_CAPACITY_SHARE = 0.5;

const ms = (v: number) => `${v.toFixed(2)} ms`;

/** The capacity case's verdict: each platform path's req/s as a share of the bare proxy's, and CPU per request beside it. */
function capacityLines(paths: Target[], figures: Figures[]): string[] {
  const of = (name: string) => {
    const f = figures[paths.findIndex((t) => t.name === name)];
    return f && !("error" in f) ? f : undefined;
  };
  const bare = of("bare proxy");
  if (!bare) return [];
  const cpu = (f: { cpuUs?: number }) => (f.cpuUs === undefined ? "" : `, ${f.cpuUs} µs CPU per request`);
  return [
    `Capacity, ${CONCURRENCY} concurrent, instant answers (goal: ≥ ${GOAL_CAPACITY_SHARE * 100} % of the bare proxy's ${bare.rps} req/s${cpu(bare)}):`,
    ...paths
      .filter((t) => t.name.startsWith("platform"))
      .flatMap((t) => {
        const f = of(t.name);
        if (!f) return [];
        const share = f.rps / bare.rps;
        return [`- ${t.name}: ${f.rps} req/s, ${(share * 100).toFixed(0)} %${cpu(f)}; ${share >= GOAL_CAPACITY_SHARE ? "met" : "NOT met"}`];
      }),
  ];
}
const plus = (v: number) => `${v >= 0 ? "+" : ""}${v.toFixed(2)} ms`;

async function main() {
  const databaseUrl = testDatabaseUrl();
  const standin = await startHelper("inference-standin.ts", { STANDIN: "openai" });
  const proxy = await startHelper("inference-bare-proxy.ts", { PROVIDER_URL: standin.url });
  const installed = installPortkey();
  let portkey: Portkey | undefined;
  let portkeyProblem = "error" in installed ? installed.error : undefined;
  if ("dir" in installed) portkey = await startPortkey(installed.dir, await freePort()).catch((err: Error) => ((portkeyProblem = err.message), undefined));
  let platform: BenchPlatform | undefined;
  try {
    platform = await startPlatform(databaseUrl, standin.url);
    const { port, jwt, apiKey } = platform;
    const prompt = (i: number) => `Why is the sky blue? Answer in one sentence. #${i}`;
    const chat = (i: number, stream: boolean) => JSON.stringify({ model: MODEL, messages: [{ role: "user", content: prompt(i) }], stream, max_tokens: 1024 });
    const openAiPath = (name: string, p: number, headers: Record<string, string> = {}, pid?: number): Target => ({
      name,
      port: p,
      path: "/v1/chat/completions",
      headers,
      body: chat,
      pid,
    });
    const platformPid = platform.service.proc.pid;
    const auth = { authorization: `Bearer ${jwt}` };
    const toPortkey = { "x-portkey-provider": "openai", "x-portkey-custom-host": `${standin.url}/v1` };
    const targets: Target[] = [
      openAiPath("direct", Number(new URL(standin.url).port)),
      openAiPath("bare proxy", Number(new URL(proxy.url).port), {}, proxy.proc.pid),
      ...(portkey ? [openAiPath("portkey", portkey.port, { ...toPortkey, ...auth }, portkey.proc.pid)] : []),
      openAiPath("platform /v1", port, auth, platformPid),
      openAiPath("platform /v1, API key", port, { authorization: `Bearer ${apiKey}` }, platformPid),
      {
        name: "platform /api",
        port,
        path: "/api/models/infer",
        headers: auth,
        body: (i, stream) => JSON.stringify({ model: MODEL, prompt: prompt(i), stream }),
        pid: platformPid,
      },
    ];
    await waitFor(() => once(targets[targets.length - 1], false).catch(() => false), {
      timeoutMs: START_TIMEOUT_MS,
      intervalMs: 200,
      message: "the platform to answer",
    });

    const cases: Array<[string, Target[], Figures[]]> = [];
    const notMeasured: string[] = [];
    const measure = async (label: string, paths: Target[], total: number, concurrency: number, stream: boolean) =>
      cases.push([label, paths, await compare(paths, total, concurrency, stream)]);
    await script(standin, { delayMs: 0 });
    await measure("non-streamed, concurrency 1, instant answers", targets, SERIAL_INSTANT, 1, false);
    // Agents' requests: a tool offered and called; Anthropic's Messages API.
    const agentPaths: AgentPaths = {
      model: MODEL,
      prompt,
      standinPort: Number(new URL(standin.url).port),
      portkey: portkey ? { port: portkey.port, headers: toPortkey } : undefined,
      platformPort: port,
      jwt,
      apiKey,
    };
    await script(standin, TOOL_CALL_SCRIPT);
    const tools = toolTargets(agentPaths);
    const toolProblem = await wrongAnswer(tools[tools.length - 1], "tool call");
    if (toolProblem) throw new Error(toolProblem);
    await measure("tools: non-streamed, concurrency 1, instant tool calls", tools, SERIAL_INSTANT, 1, false);
    await script(standin, { delayMs: 0 });
    const messages = messagesTargets(agentPaths);
    const messagesProblem = await wrongAnswer(messages[messages.length - 1], "message");
    if (messagesProblem) notMeasured.push(`/v1/messages not measured: ${messagesProblem}`);
    else await measure("/v1/messages: non-streamed, concurrency 1, instant answers", messages, SERIAL_INSTANT, 1, false);
    await script(standin, { delayMs: 10, jitterMs: 20, chunkDelayMs: 2 });
    await measure("non-streamed, concurrency 1, answers in 10–30 ms", targets, SERIAL, 1, false);
    await measure("streamed TTFB, concurrency 1, first token in 10–30 ms", targets, SERIAL, 1, true);
    await script(standin, { delayMs: 100, jitterMs: 200, chunkDelayMs: 5 });
    await measure(`non-streamed, ${CONCURRENCY} concurrent, answers in 100–300 ms`, targets, REQUESTS, CONCURRENCY, false);
    await measure(`streamed TTFB, ${CONCURRENCY} concurrent, first token in 100–300 ms`, targets, STREAMS, CONCURRENCY, true);
    await script(standin, { delayMs: 0 });
    await measure(`capacity: non-streamed, ${CONCURRENCY} concurrent, instant answers`, targets, CAPACITY_REQUESTS, CONCURRENCY, false);

    console.log(
      `\nbench:inference — OpenAI-format stand-in; bare proxy, Portkey ${PORTKEY_VERSION} and the platform each in its own process; ` +
        `${os.cpus().length} CPUs, load average ${os.loadavg()[0].toFixed(2)} at the end`,
    );
    if (portkeyProblem) console.log(`Portkey not measured: ${portkeyProblem}`);
    for (const line of notMeasured) console.log(line);
    console.log("| case | path | p50 | p99 | req/s | added p50 | added p99 | CPU per request (its gateway) |");
    console.log("|---|---|---|---|---|---|---|---|");
    for (const [label, paths, figures] of cases) {
      const direct = figures[0];
      figures.forEach((f, i) => {
        const cells =
          "error" in f
            ? `failed: ${f.error.replace(/\|/g, "/").slice(0, 120)} | | | | | |`
            : `${ms(f.p50)} | ${ms(f.p99)} | ${f.rps} | ${i === 0 || "error" in direct ? "" : plus(f.p50 - direct.p50)} | ${i === 0 || "error" in direct ? "" : plus(f.p99 - direct.p99)} | ${f.cpuUs === undefined ? "" : `${f.cpuUs} µs`} |`;
        console.log(`| ${i === 0 ? label : ""} | ${paths[i].name} | ${cells}`);
      });
    }
    const added = (paths: Target[], figures: Figures[], name: string) => {
      const f = figures[paths.findIndex((t) => t.name === name)];
      const d = figures[0];
      return f && !("error" in f) && !("error" in d) ? f.p50 - d.p50 : undefined;
    };
    console.log(`\nAdded p50 over the direct path, per case (goal: the platform ≤ +${GOAL_ADDED_MS} ms and below Portkey):`);
    for (const [label, paths, figures] of cases) {
      const shown = paths.filter((t) => t.name !== "direct" && t.name !== "bare proxy");
      const show = (name: string) => `${name} ${added(paths, figures, name) === undefined ? "n/a" : plus(added(paths, figures, name)!)}`;
      // The case's first platform path is the one the goal is about (/v1, tools, /v1/messages).
      const platform = added(paths, figures, shown.find((t) => t.name.startsWith("platform"))!.name);
      const pk = added(paths, figures, "portkey");
      const verdict =
        platform === undefined
          ? ""
          : `; ≤ +${GOAL_ADDED_MS} ms: ${platform <= GOAL_ADDED_MS ? "met" : "NOT met"}${pk === undefined ? "" : `, below Portkey: ${platform < pk ? "yes" : "no"}`}`;
      console.log(`- ${label}: ${shown.map((t) => show(t.name)).join(" · ")}${verdict}`);
    }
    const [, capacityPaths, capacity] = cases[cases.length - 1];
    for (const line of capacityLines(capacityPaths, capacity)) console.log(line);
  } finally {
    portkey?.stop();
    await stopAll(databaseUrl, platform, [proxy, standin]);
  }
}

runBench(main);
