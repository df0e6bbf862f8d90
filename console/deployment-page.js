// One deployment's page (#deployments/<id>): its status and why, its replicas (GPU jobs, linked to
// their pages), its latest requests (GET /api/deployments/:id/requests) and a chat box that sends a
// chat completion to it by its name (POST /v1/chat/completions) and shows the answer; read again every 3 s.
import { api } from "./api.js";
import { h, guarded, dataTable, fmtDate, fmtDuration, statusBadge } from "./ui.js";
import { every } from "./live.js";

/** How much of the command the page shows. */
const COMMAND_SHOWN = 200;
const jobLink = (id) => h("a", { href: `#jobs/${encodeURIComponent(id)}`, className: "mono" }, id.slice(0, 8));
const emptyRow = (columns, text) => h("tr", {}, h("td", { colspan: columns, className: "muted" }, text));

function facts(d) {
  const { desired, starting, ready } = d.replicas;
  const rows = [
    ["Model", d.model],
    ["Why", d.statusReason ?? "—"],
    ["Replicas", `${ready} ready · ${starting} starting · ${desired} desired`],
    ["Min–max", `${d.minReplicas}–${d.maxReplicas} (another above ${d.targetInflight} in flight each)`],
    ["Command", d.command],
    ["GPU", `${d.gpuType ?? "any"}${d.gpuCount > 1 ? ` ×${d.gpuCount}` : ""} · port ${d.port}`],
    ["Idle after", `${d.idleTimeoutSeconds} s`],
    ["Created", fmtDate(d.createdAt)],
  ];
  // A long command (a script inlined) is cut, the whole of it in the tooltip.
  const shown = (k, v) => (k === "Command" && v.length > COMMAND_SHOWN ? `${v.slice(0, COMMAND_SHOWN)}…` : String(v));
  return rows.flatMap(([k, v]) => [h("dt", {}, k), h("dd", { className: k === "Command" ? "mono" : "", title: k === "Command" ? v : undefined }, shown(k, v))]);
}

const replicaRow = (job) =>
  h("tr", { "data-id": job.id }, h("td", {}, jobLink(job.id)), h("td", {}, statusBadge(job.status)), h("td", {}, fmtDate(job.startedAt ?? job.createdAt)));

const requestRow = (r) =>
  h(
    "tr",
    { "data-id": r.id },
    h("td", {}, fmtDate(r.createdAt)),
    h("td", {}, r.outcome === "ok" ? "ok" : `${r.outcome}${r.errorCode ? ` (${r.errorCode})` : ""}`),
    h("td", {}, `${r.promptTokens} + ${r.completionTokens}`),
    h("td", {}, fmtDuration(r.durationMs)),
    h("td", {}, r.stream ? "stream" : "—"),
  );

/** The chat box: one chat completion to the deployment by its name, its answer (or why not) below the question. */
function chatBox(name, signal, onAnswered) {
  const slot = h("div");
  const prompt = h("textarea", { id: "dep-chat-prompt", rows: 2, required: true, placeholder: "Ask the deployment something…" });
  const transcript = h("div", { className: "chat", "aria-live": "polite", "aria-label": "Conversation" });
  const send = h("button", { type: "submit" }, "Send");
  const form = h(
    "form",
    { className: "card", "aria-label": "Chat with the deployment" },
    h("h2", {}, "Chat"),
    h("p", { className: "muted" }, "A request with no ready replica starts one and waits for it (a cold start)."),
    transcript,
    h("p", {}, h("label", { for: "dep-chat-prompt" }, "Message"), prompt),
    slot,
    send,
  );
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const text = prompt.value;
    const waiting = h("p", { className: "muted" }, "Waiting for the answer…");
    transcript.append(h("p", { className: "msg user" }, text), waiting);
    prompt.value = "";
    send.disabled = true;
    guarded(slot, async () => {
      const completion = await api("POST", "/v1/chat/completions", { model: name, messages: [{ role: "user", content: text }] }, signal);
      const tokens = completion.usage ? ` · ${completion.usage.total_tokens} tokens` : "";
      transcript.append(
        h("p", { className: "msg assistant" }, completion.choices[0]?.message?.content ?? ""),
        h("small", { className: "muted" }, `${completion.model}${tokens}`),
      );
      onAnswered();
    }).finally(() => {
      waiting.remove();
      send.disabled = false;
    });
  });
  return form;
}

export function deploymentPage(id, signal) {
  const slot = h("div");
  const title = h("span", { className: "mono" }, "…");
  const status = h("span", { "aria-live": "polite" });
  const head = h("dl", { className: "facts" });
  const replicas = h("tbody");
  const requests = h("tbody");
  const chat = h("div");
  const path = `/api/deployments/${encodeURIComponent(id)}`;
  const refresh = () =>
    guarded(slot, async () => {
      const [d, { jobs }, recent] = await Promise.all([
        api("GET", path, undefined, signal),
        api("GET", `/api/gpu/jobs?deploymentId=${encodeURIComponent(id)}`, undefined, signal),
        api("GET", `${path}/requests`, undefined, signal),
      ]);
      title.textContent = d.name;
      status.replaceChildren(statusBadge(d.status));
      head.replaceChildren(...facts(d));
      replicas.replaceChildren(...(jobs.length ? jobs.map(replicaRow) : [emptyRow(3, "No replica: a request starts one.")]));
      requests.replaceChildren(...(recent.requests.length ? recent.requests.map(requestRow) : [emptyRow(5, "No request yet: ask it something below.")]));
      if (!chat.firstChild) chat.append(chatBox(d.name, signal, refresh));
    });
  every(3000, signal, refresh);
  return h(
    "div",
    {},
    h("p", {}, h("a", { href: "#deployments" }, "← All deployments")),
    h("h1", {}, "Deployment ", title, " ", status),
    slot,
    h("section", { className: "card" }, head),
    h(
      "section",
      { className: "card" },
      h("h2", {}, "Replicas"),
      h("div", { className: "scroll" }, dataTable("Replicas", ["Job", "Status", "Since"], replicas)),
    ),
    h(
      "section",
      { className: "card" },
      h("h2", {}, "Recent requests"),
      h("div", { className: "scroll" }, dataTable("Recent requests", ["When", "Outcome", "Tokens (prompt + answer)", "Took", "Stream"], requests)),
    ),
    chat,
  );
}
