// Models: the list, and a chat playground whose reply streams in (POST /api/models/infer, stream: true);
// with tools given, one answer of POST /v1/chat/completions, its tool calls shown as calls (chat-tools.js).
import { api, streamEvents } from "./api.js";
import { answerViews, toolsFrom } from "./chat-tools.js";
import { h, guarded, copyLine } from "./ui.js";

/** No provider answers: what to run to get one (docs/inference.md). */
function noProvider() {
  return h(
    "section",
    { className: "card empty", "aria-label": "No model provider" },
    h("h2", {}, "No model provider answers"),
    h("p", {}, "The platform found no model to serve. Run Ollama on the platform's host and pull a small model:"),
    copyLine("curl -fsSL https://ollama.com/install.sh | sh"),
    copyLine("ollama pull llama3.2:1b"),
    h("p", {}, "or point the inference service at an OpenAI-compatible server (vLLM, llama.cpp, LM Studio) and restart it:"),
    copyLine(`OPENAI_PROVIDERS='[{"name":"vllm","url":"http://gpu-box:8000"}]'`),
    h("p", { className: "muted" }, "The list is refreshed at most every 30 seconds (MODELS_CACHE_S): reload this page then."),
  );
}

export function modelsPage(signal) {
  const slot = h("div");
  const model = h("select", { id: "chat-model" });
  const system = h("input", { id: "chat-system", placeholder: "optional" });
  const prompt = h("textarea", { id: "chat-prompt", rows: 3, required: true, placeholder: "Ask something…" });
  const tools = h("textarea", { id: "chat-tools", rows: 2, placeholder: 'optional: {"name": "get_weather", "parameters": {…}}' });
  const transcript = h("div", { className: "chat", "aria-live": "polite", "aria-label": "Conversation" });
  const list = h("ul", { className: "plain" });
  const send = h("button", { type: "submit" }, "Send");
  const empty = h("div");
  guarded(slot, async () => {
    const { models } = await api("GET", "/api/models", undefined, signal);
    // Nothing to talk to: say what to run, and nothing can be sent.
    empty.replaceChildren(...(models.length ? [] : [noProvider()]));
    send.disabled = models.length === 0;
    model.replaceChildren(...models.map((m) => h("option", { value: m.name }, `${m.name} (${m.provider})`)));
    list.replaceChildren(...models.map((m) => h("li", {}, h("strong", {}, m.name), " ", h("span", { className: "muted" }, m.description ?? ""))));
  });
  const form = h(
    "form",
    { className: "card", "aria-label": "Chat playground" },
    h("h2", {}, "Playground"),
    h(
      "div",
      { className: "grid" },
      h("p", {}, h("label", { for: "chat-model" }, "Model"), model),
      h("p", {}, h("label", { for: "chat-system" }, "System prompt"), system),
    ),
    h("p", {}, h("label", { for: "chat-tools" }, "Tools (JSON)"), tools),
    transcript,
    h("p", {}, h("label", { for: "chat-prompt" }, "Prompt"), prompt),
    send,
  );
  /** With tools: one answer of /v1/chat/completions, its text and tool calls appended to the transcript. */
  async function askWithTools(text, offered) {
    transcript.append(h("p", { className: "msg user" }, text));
    const messages = [...(system.value.trim() ? [{ role: "system", content: system.value.trim() }] : []), { role: "user", content: text }];
    const completion = await api("POST", "/v1/chat/completions", { model: model.value, messages, tools: offered }, signal);
    const { usage } = completion;
    transcript.append(...answerViews(completion.choices[0].message), h("small", { className: "muted" }, `${usage.total_tokens} tokens`));
  }

  function streamReply(text) {
    const reply = h("p", { className: "msg assistant", "data-streaming": "true" });
    const meta = h("small", { className: "muted" });
    transcript.append(h("p", { className: "msg user" }, text), reply, meta);
    const body = { model: model.value, prompt: text, stream: true };
    if (system.value.trim()) body.systemPrompt = system.value.trim();
    return streamEvents(
      "POST",
      "/api/models/infer",
      body,
      (_name, data) => {
        const chunk = JSON.parse(data);
        if (chunk.error) throw new Error(chunk.error.message ?? String(chunk.error));
        if (chunk.delta) reply.append(chunk.delta);
        if (chunk.done) meta.textContent = `${chunk.tokensUsed} tokens · ${chunk.durationMs} ms`;
      },
      signal,
    ).finally(() => {
      reply.dataset.streaming = "false";
      // A reply that never came (the provider failed before its first word): no empty bubble, the error says why.
      if (!reply.textContent) {
        reply.remove();
        meta.remove();
      }
    });
  }

  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const text = prompt.value;
    if (!model.value) return;
    send.disabled = true;
    guarded(slot, () => {
      // Tools in words before anything is sent: a mistake keeps the prompt.
      const offered = tools.value.trim() ? toolsFrom(tools.value) : undefined;
      prompt.value = "";
      return offered ? askWithTools(text, offered) : streamReply(text);
    }).finally(() => (send.disabled = false));
  });
  return h("div", {}, h("h1", {}, "Models"), slot, empty, form, h("section", { className: "card" }, h("h2", {}, "Available models"), list));
}
