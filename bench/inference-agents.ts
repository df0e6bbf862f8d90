/**
 * bench:inference's requests as agents send them, beside plain chat: a chat completion offering
 * one function tool, which the stand-in answers with a call of it; and Anthropic's Messages API
 * (POST /v1/messages, the API key as `x-api-key`), which the platform turns into a chat at the
 * same OpenAI-format stand-in. Each has its direct path (the stand-in, sent the chat the platform
 * sends it), Portkey's (same request; it may not take it: then it shows as failed) and the platform's.
 */
import type { Target } from "./inference-measure";

const WEATHER = {
  type: "function",
  function: {
    name: "get_weather",
    description: "The weather in a city",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
};

/** The stand-in's script while the tools case runs: every answer is a call of the tool. */
export const TOOL_CALL_SCRIPT = { delayMs: 0, toolCalls: [{ name: "get_weather", arguments: '{"city":"Oslo"}' }] };

export type AgentPaths = {
  model: string;
  prompt: (i: number) => string;
  standinPort: number;
  /** Portkey's port and the headers that send it on to the stand-in; absent when it is not running. */
  portkey?: { port: number; headers: Record<string, string> };
  platformPort: number;
  jwt: string;
  apiKey: string;
};

const chat = (p: AgentPaths, extra: Record<string, unknown>) => (i: number, stream: boolean) =>
  JSON.stringify({ model: p.model, messages: [{ role: "user", content: p.prompt(i) }], stream, max_tokens: 1024, ...extra });

/** POST /v1/chat/completions with one function tool, on every path. */
export function toolTargets(p: AgentPaths): Target[] {
  const body = chat(p, { tools: [WEATHER], tool_choice: "auto" });
  const at = (name: string, port: number, headers: Record<string, string>): Target => ({ name, port, path: "/v1/chat/completions", headers, body });
  return [
    at("direct", p.standinPort, {}),
    ...(p.portkey ? [at("portkey", p.portkey.port, { ...p.portkey.headers, authorization: `Bearer ${p.jwt}` })] : []),
    at("platform /v1 tools", p.platformPort, { authorization: `Bearer ${p.jwt}` }),
  ];
}

/** Anthropic's request (POST /v1/messages), against the chat the platform makes of it at the stand-in. */
export function messagesTargets(p: AgentPaths): Target[] {
  const messages = (i: number, stream: boolean) =>
    JSON.stringify({ model: p.model, max_tokens: 1024, messages: [{ role: "user", content: p.prompt(i) }], stream });
  const anthropic = { "x-api-key": p.apiKey, "anthropic-version": "2023-06-01" };
  return [
    { name: "direct", port: p.standinPort, path: "/v1/chat/completions", headers: {}, body: chat(p, {}) },
    ...(p.portkey ? [{ name: "portkey", port: p.portkey.port, path: "/v1/messages", headers: { ...p.portkey.headers, ...anthropic }, body: messages }] : []),
    { name: "platform /v1/messages", port: p.platformPort, path: "/v1/messages", headers: anthropic, body: messages },
  ];
}

/**
 * What the platform answers a target's first request, when it is not what the case measures (a
 * tool call; an Anthropic message): a sentence, else undefined.
 */
export async function wrongAnswer(t: Target, expect: "tool call" | "message"): Promise<string | undefined> {
  const res = await fetch(`http://127.0.0.1:${t.port}${t.path}`, {
    method: "POST",
    headers: { ...t.headers, "content-type": "application/json" },
    body: t.body(0, false),
  });
  const text = await res.text();
  if (res.status !== 200) return `${t.name} answered ${res.status}: ${text.slice(0, 200)}`;
  const body = JSON.parse(text) as { choices?: Array<{ message?: { tool_calls?: unknown[] } }>; type?: string; content?: Array<{ type: string }> };
  const ok = expect === "tool call" ? (body.choices?.[0]?.message?.tool_calls?.length ?? 0) > 0 : body.type === "message" && Array.isArray(body.content);
  return ok ? undefined : `${t.name} did not answer with a ${expect}: ${text.slice(0, 200)}`;
}
