// The playground's tools: the function tools typed as JSON, sent with POST /v1/chat/completions
// (OpenAI's API), and an answer's tool calls shown as calls (name and arguments), never as an empty reply.
import { h } from "./ui.js";

const NAME = /^[a-zA-Z0-9_-]{1,64}$/;

/** The tools field's JSON: one tool or a list, each OpenAI's `{"type": "function", "function": {…}}` or just its function. Throws in words. */
export function toolsFrom(text) {
  let value;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new Error(`Tools: not JSON (${err.message})`, { cause: err });
  }
  return (Array.isArray(value) ? value : [value]).map((spec, i) => {
    const fn = spec?.type === "function" ? spec.function : spec;
    if (!fn || typeof fn !== "object" || !NAME.test(fn.name ?? ""))
      throw new Error(`Tools: tool ${i + 1} must be a function with a name of 1 to 64 letters, digits, _ or -`);
    return { type: "function", function: fn };
  });
}

/** One tool call of an answer: its name and the arguments the model wrote. */
export function toolCallView(call) {
  return h(
    "p",
    { className: "msg assistant tool-call", "data-tool": call.function.name },
    h("span", { className: "muted" }, "tool call "),
    h("code", {}, `${call.function.name}(${call.function.arguments})`),
  );
}

/** The views of an answer of /v1/chat/completions: its text if any, then each tool call. */
export function answerViews(message) {
  const views = message.content ? [h("p", { className: "msg assistant" }, message.content)] : [];
  return [...views, ...(message.tool_calls ?? []).map(toolCallView)];
}
