// Jobs: the submit form with every control, the list (refreshed live), and a job's detail with its
// status events, its output followed as it is printed, and cancel.
import { api, stream, streamEvents } from "./api.js";
import { h, guarded, fmtDate, statusBadge } from "./ui.js";
import { every } from "./live.js";

const TERMINAL = new Set(["completed", "failed", "cancelled"]);

function field(id, label, input, hint) {
  input.id = id;
  return h("p", {}, h("label", { for: id }, label), input, hint ? h("small", { className: "muted" }, hint) : null);
}

/** KEY=value lines → an env object (blank lines skipped); a line without "=" is an error in words. */
export function parseEnv(text) {
  const env = {};
  for (const line of text
    .split("\n")
    .map((l) => l.trim())
    .filter(Boolean)) {
    const at = line.indexOf("=");
    if (at <= 0) throw new Error(`Environment line "${line}" is not NAME=value`);
    env[line.slice(0, at)] = line.slice(at + 1);
  }
  return env;
}

function submitForm(onSubmitted) {
  const slot = h("div");
  const command = h("textarea", { rows: 3, required: true, placeholder: "nvidia-smi && python train.py", className: "mono" });
  const gpuType = h("input", { placeholder: "any" });
  const gpuCount = h("input", { type: "number", min: 1, max: 16, value: 1 });
  const timeout = h("input", { type: "number", min: 1, max: 604800, placeholder: "3600" });
  const queueTimeout = h("input", { type: "number", min: 1, max: 604800, placeholder: "none" });
  const retries = h("input", { type: "number", min: 0, max: 10, value: 0 });
  const priority = h(
    "select",
    {},
    ["normal", "high", "low"].map((p) => h("option", { value: p }, p)),
  );
  const image = h("input", { placeholder: "default image" });
  const env = h("textarea", { rows: 2, placeholder: "NAME=value, one a line", className: "mono" });
  const form = h(
    "form",
    { className: "card", "aria-label": "Submit a job" },
    h("h2", {}, "Submit a job"),
    field("job-command", "Command", command),
    h(
      "div",
      { className: "grid" },
      field("job-gpu-type", "GPU type", gpuType),
      field("job-gpu-count", "GPUs", gpuCount),
      field("job-timeout", "Timeout (s)", timeout),
      field("job-queue-timeout", "Queue timeout (s)", queueTimeout),
      field("job-retries", "Max retries", retries),
      field("job-priority", "Priority", priority),
      field("job-image", "Container image", image),
    ),
    field("job-env", "Environment", env, "Values are never shown again"),
    slot,
    h("button", { type: "submit" }, "Submit job"),
  );
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    guarded(slot, async () => {
      const body = { command: command.value, gpuCount: Number(gpuCount.value), priority: priority.value, maxRetries: Number(retries.value) };
      if (gpuType.value.trim()) body.gpuType = gpuType.value.trim();
      if (timeout.value) body.timeoutSeconds = Number(timeout.value);
      if (queueTimeout.value) body.queueTimeoutSeconds = Number(queueTimeout.value);
      if (image.value.trim()) body.containerImage = image.value.trim();
      const vars = parseEnv(env.value);
      if (Object.keys(vars).length) body.env = vars;
      const job = await api("POST", "/api/gpu/jobs", body);
      onSubmitted(job);
    });
  });
  return form;
}

function jobRow(job) {
  return h(
    "tr",
    {},
    h("td", {}, h("a", { href: `#jobs/${encodeURIComponent(job.id)}`, className: "mono" }, job.id.slice(0, 8))),
    h("td", {}, statusBadge(job.status)),
    h("td", { className: "mono clip" }, job.command),
    h("td", {}, job.gpuType, job.gpuCount > 1 ? ` ×${job.gpuCount}` : ""),
    h("td", {}, job.status === "queued" && job.queuePosition ? `#${job.queuePosition} ` : "", h("span", { className: "muted" }, job.statusReason ?? "")),
    h("td", {}, fmtDate(job.createdAt)),
  );
}

export function jobsPage(signal) {
  const slot = h("div");
  const body = h("tbody");
  const table = h(
    "table",
    { "aria-label": "Jobs" },
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        ["Job", "Status", "Command", "GPU", "Queue", "Created"].map((c) => h("th", { scope: "col" }, c)),
      ),
    ),
    body,
  );
  const refresh = () =>
    guarded(slot, async () => {
      const { jobs } = await api("GET", "/api/gpu/jobs", undefined, signal);
      body.replaceChildren(...(jobs.length ? jobs.map(jobRow) : [h("tr", {}, h("td", { colspan: 6, className: "muted" }, "No jobs yet"))]));
    });
  every(2000, signal, refresh);
  const form = submitForm((job) => (location.hash = `#jobs/${encodeURIComponent(job.id)}`));
  return h("div", {}, h("h1", {}, "Jobs"), form, h("section", { className: "card" }, h("h2", {}, "Your jobs"), slot, h("div", { className: "scroll" }, table)));
}

/** What the job may reach of the platform (its token's scopes, models, databases): never a secret. */
function accessFacts(access) {
  if (!access) return [["Platform access", "none"]];
  return [
    ["Platform scopes", access.scopes.join(", ")],
    ["Platform models", access.models?.join(", ") ?? "all"],
    ["Platform databases", access.databases?.join(", ") ?? "—"],
  ];
}

export function jobPage(id, signal) {
  const slot = h("div");
  const head = h("dl", { className: "facts" });
  const status = h("span", { "aria-live": "polite" });
  const log = h("pre", { className: "log", "aria-label": "Job output", tabindex: 0 });
  const cancel = h("button", { type: "button", className: "danger" }, "Cancel job");
  const show = (job) => {
    status.replaceChildren(statusBadge(job.status));
    cancel.disabled = TERMINAL.has(job.status);
    const facts = [
      ["Command", job.command],
      ["GPU", `${job.gpuType}${job.gpuCount > 1 ? ` ×${job.gpuCount}` : ""}`],
      ["Why", job.statusReason ?? "—"],
      ["Created", fmtDate(job.createdAt)],
      ["Started", fmtDate(job.startedAt)],
      ["Ended", fmtDate(job.completedAt)],
      ["GPU seconds", job.gpuSecondsUsed ?? 0],
      ["Exit / error", job.errorMessage ?? (job.result ? JSON.stringify(job.result) : "—")],
      ...accessFacts(job.platformAccess),
    ];
    head.replaceChildren(...facts.flatMap(([k, v]) => [h("dt", {}, k), h("dd", { className: k === "Command" ? "mono" : "" }, String(v))]));
  };
  cancel.addEventListener("click", () => guarded(slot, async () => show(await api("POST", `/api/gpu/jobs/${encodeURIComponent(id)}/cancel`))));
  const path = `/api/gpu/jobs/${encodeURIComponent(id)}`;
  guarded(slot, () => streamEvents("GET", `${path}/events`, undefined, (name, data) => name === "status" && show(JSON.parse(data)), signal));
  // The output: what exists, then new lines as they are printed (the stream ends with the job).
  guarded(slot, () => stream("GET", `${path}/logs?follow=true`, undefined, (text) => log.append(text), signal));
  return h(
    "div",
    {},
    h("p", {}, h("a", { href: "#jobs" }, "← All jobs")),
    h("h1", {}, "Job ", h("span", { className: "mono" }, id.slice(0, 8)), " ", status),
    slot,
    h("section", { className: "card" }, head, cancel),
    h("section", { className: "card" }, h("h2", {}, "Output (live)"), log),
  );
}
