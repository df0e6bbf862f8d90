// Jobs: the submit form with every control and the list (refreshed live); a job's page is job-page.js.
import { api } from "./api.js";
import { h, guarded, dataTable, fmtDate, statusBadge, copyLine, field } from "./ui.js";
import { every } from "./live.js";

/** No job yet: a first one to run from a terminal (the CLI, docs/clients.md), or the form above. */
function firstJob() {
  return h(
    "tr",
    {},
    h(
      "td",
      { colspan: 6, className: "empty" },
      h("p", {}, "No jobs yet. Submit one with the form above, or from a terminal with the CLI:"),
      copyLine("ci-platform jobs run --wait --follow -- nvidia-smi"),
    ),
  );
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
  const table = dataTable("Jobs", ["Job", "Status", "Command", "GPU", "Queue", "Created"], body);
  const refresh = () =>
    guarded(slot, async () => {
      const { jobs } = await api("GET", "/api/gpu/jobs", undefined, signal);
      body.replaceChildren(...(jobs.length ? jobs.map(jobRow) : [firstJob()]));
    });
  every(2000, signal, refresh);
  const form = submitForm((job) => (location.hash = `#jobs/${encodeURIComponent(job.id)}`));
  return h("div", {}, h("h1", {}, "Jobs"), form, h("section", { className: "card" }, h("h2", {}, "Your jobs"), slot, h("div", { className: "scroll" }, table)));
}
