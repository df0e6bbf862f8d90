/**
 * `chat`: a reply streamed from POST /api/models/infer; with `--tool` or `--json-schema`, one chat
 * completion from POST /v1/chat/completions (OpenAI's API), which offers the tools or asks for
 * the schema, and prints a tool call as one: `tool call: name(arguments)`.
 */
import { readFileSync } from "fs";
import path from "path";
import type { Argv } from "yargs";
import type { ChatCompletion, ChatCompletionRequest } from "../../sdk/src";
import { Context, readStdin, Run, UsageError } from "./context";
import { printJson } from "./output";
import { rawOption, untrustedText } from "./terminal";

type Json = Record<string, unknown>;
type Tool = NonNullable<ChatCompletionRequest["tools"]>[number];
type ResponseFormat = NonNullable<ChatCompletionRequest["response_format"]>;
type Message = ChatCompletionRequest["messages"][number];

const NAME = /^[a-zA-Z0-9_-]{1,64}$/;
const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);

/** A JSON object from `file`; a missing, unreadable or invalid file is a usage error naming the option. */
export function readJsonObject(option: string, file: string): Json {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    throw new UsageError(`${option}: cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new UsageError(`${option}: ${file} is not JSON (${(err as Error).message})`);
  }
  if (!isObject(value)) throw new UsageError(`${option}: ${file} must hold a JSON object`);
  return value;
}

/**
 * `--json-schema FILE`: the file is a JSON Schema (named after the file), or OpenAI's
 * `{"name", "schema"}`; the answer must follow it (`strict: true`).
 */
export function responseFormatOf(file: string, spec = readJsonObject("--json-schema", file)): ResponseFormat {
  const wrapped = isObject(spec.schema) && typeof spec.name === "string";
  const name = wrapped
    ? (spec.name as string)
    : path
        .basename(file)
        .replace(/\.[^.]*$/, "")
        .replace(/[^a-zA-Z0-9_-]/g, "_")
        .slice(0, 64) || "answer";
  if (!NAME.test(name)) throw new UsageError(`--json-schema: the name "${name}" must be 1 to 64 letters, digits, underscores or dashes`);
  return { type: "json_schema", json_schema: { name, schema: (wrapped ? spec.schema : spec) as Json, strict: true } };
}

/** `--tool FILE`: OpenAI's function tool `{"type": "function", "function": {…}}`, or just its function `{"name", "description", "parameters"}`. */
export function toolOf(file: string, spec = readJsonObject("--tool", file)): Tool {
  const fn = spec.type === "function" ? spec.function : spec;
  if (!isObject(fn) || typeof fn.name !== "string" || !NAME.test(fn.name))
    throw new UsageError(`--tool: ${file} must hold a function tool: {"name", "description", "parameters"}, the name 1 to 64 letters, digits, _ or -`);
  return { type: "function", function: fn as Tool["function"] };
}

/** How a tool call reads on the terminal. */
export const toolCallLine = (call: { function: { name: string; arguments: string } }) => `tool call: ${call.function.name}(${call.function.arguments})\n`;

type ChatArgs = {
  model: string;
  prompt?: string;
  system?: string;
  maxTokens?: number;
  temperature?: number;
  raw?: boolean;
  tool?: string[];
  jsonSchema?: string;
};

/** The answer of /v1/chat/completions: its text, then each tool call on its own line. */
function printCompletion(ctx: Context, completion: ChatCompletion, raw?: boolean): void {
  const { message } = completion.choices[0];
  const out = untrustedText(ctx.stdout, raw);
  if (message.content) out.write(`${message.content}\n`);
  for (const call of message.tool_calls ?? []) out.write(toolCallLine(call));
  out.end();
}

async function chat(ctx: Context, args: ChatArgs): Promise<void> {
  // The files first: a mistake in them is the caller's, before anything is read or sent.
  const tools = (args.tool ?? []).map((file) => toolOf(file));
  const responseFormat = args.jsonSchema ? responseFormatOf(args.jsonSchema) : undefined;
  const prompt = args.prompt ?? (ctx.stdin.isTTY ? "" : await readStdin(ctx.stdin));
  if (!prompt.trim()) throw new UsageError("No prompt: give one, or pipe it on stdin");
  if (tools.length || responseFormat) {
    const messages: Message[] = [...(args.system ? [{ role: "system" as const, content: args.system }] : []), { role: "user", content: prompt }];
    const completion = await ctx.client().chatCompletion({
      model: args.model,
      messages,
      ...(tools.length ? { tools } : {}),
      ...(responseFormat ? { response_format: responseFormat } : {}),
      ...(args.maxTokens !== undefined ? { max_tokens: args.maxTokens } : {}),
      ...(args.temperature !== undefined ? { temperature: args.temperature } : {}),
    });
    return ctx.json ? printJson(ctx, completion) : printCompletion(ctx, completion, args.raw);
  }
  const body = { model: args.model, prompt, systemPrompt: args.system, maxTokens: args.maxTokens, temperature: args.temperature };
  if (ctx.json) return printJson(ctx, await ctx.client().infer(body));
  const out = untrustedText(ctx.stdout, args.raw);
  for await (const chunk of ctx.client().inferStream(body)) if (chunk.delta) out.write(chunk.delta);
  out.end();
  ctx.stdout.write("\n");
}

export function chatCommand(y: Argv, run: Run): Argv {
  return y.command(
    "chat <model> [prompt]",
    "stream a reply (the prompt from stdin when not given); with --tool or --json-schema, one answer of /v1/chat/completions",
    (c) =>
      c
        .positional("model", { type: "string", demandOption: true })
        .positional("prompt", { type: "string" })
        .option("system", { type: "string", describe: "system prompt" })
        .option("max-tokens", { type: "number" })
        .option("temperature", { type: "number" })
        .option("tool", { type: "string", array: true, describe: "a function tool the model may call, from a JSON file (repeatable)" })
        .option("json-schema", { type: "string", describe: "a JSON Schema file the answer must follow (response_format json_schema, strict)" })
        .option(...rawOption),
    run((ctx, args) => chat(ctx, args as ChatArgs)),
  );
}
