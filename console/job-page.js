// A job's page: its facts (exit code, error, elapsed time live while it runs, duration, the array,
// dependencies and deployment it belongs to), its status events, its output once (followed as it
// is printed), cancel, and its artifacts downloaded behind the session's token.
import { api, download, stream, streamEvents } from "./api.js";
import { h, guarded, fmtDate, fmtDuration, statusBadge } from "./ui.js";

const TERMINAL = new Set(["completed", "failed", "cancelled"]);

/** What the job may reach of the platform (its token's scopes, models, databases): never a secret. */
function accessFacts(access) {
  if (!access) return [["Platform access", "none"]];
  return [
    ["Platform scopes", access.scopes.join(", ")],
    ["Platform models", access.models?.join(", ") ?? "all"],
    ["Platform databases", access.databases?.join(", ") ?? "—"],
  ];
}

const jobLink = (id) => h("a", { href: `#jobs/${encodeURIComponent(id)}`, className: "mono" }, id.slice(0, 8));

/** The groups a job belongs to, only those it has: an array, the jobs it waits on, a deployment, a schedule. */
function groupFacts(job) {
  const facts = [];
  if (job.arrayId) facts.push(["Array", h("span", { className: "mono" }, `${job.arrayId.slice(0, 8)} · index ${job.arrayIndex ?? "—"}`)]);
  if (Array.isArray(job.dependsOn) && job.dependsOn.length)
    facts.push([
      "Depends on",
      h(
        "span",
        {},
        job.dependsOn.flatMap((d, i) => [i ? ", " : "", jobLink(d.jobId), ` (${d.condition})`]),
      ),
    ]);
  if (job.deploymentId) facts.push(["Deployment", h("a", { href: "#deployments", className: "mono" }, job.deploymentId.slice(0, 8))]);
  if (job.scheduleId) facts.push(["Schedule", h("span", { className: "mono" }, job.scheduleId.slice(0, 8))]);
  return facts;
}

/** Elapsed while it runs (from its start, or its creation while queued); the duration once it has ended. */
function timeFacts(job, now) {
  const started = job.startedAt ? Date.parse(job.startedAt) : null;
  const ended = job.completedAt ? Date.parse(job.completedAt) : null;
  if (TERMINAL.has(job.status)) return [["Duration", started && ended ? fmtDuration(ended - started) : "—"]];
  if (started) return [["Elapsed", fmtDuration(now - started)]];
  return [["Waiting", fmtDuration(now - Date.parse(job.createdAt))]];
}

export function jobPage(id, signal) {
  const slot = h("div");
  const head = h("dl", { className: "facts" });
  const status = h("span", { "aria-live": "polite" });
  const log = h("pre", { className: "log", "aria-label": "Job output", tabindex: 0 });
  const cancel = h("button", { type: "button", className: "danger" }, "Cancel job");
  const artifacts = h("button", { type: "button", disabled: true }, "Download artifacts");
  const artifactsHint = h("small", { className: "muted" }, "The files the job leaves under /out, as a tar, once it has ended.");
  let job = null;
  const show = () => {
    status.replaceChildren(statusBadge(job.status));
    cancel.disabled = TERMINAL.has(job.status);
    artifacts.disabled = !TERMINAL.has(job.status);
    const facts = [
      ["Command", job.command],
      ["GPU", `${job.gpuType}${job.gpuCount > 1 ? ` ×${job.gpuCount}` : ""}`],
      ["Why", job.statusReason ?? "—"],
      ["Exit code", job.result ? String(job.result.exitCode) : "—"],
      ["Error", job.errorMessage ?? "—"],
      ["Created", fmtDate(job.createdAt)],
      ["Started", fmtDate(job.startedAt)],
      ["Ended", fmtDate(job.completedAt)],
      ...timeFacts(job, Date.now()),
      ["GPU seconds", job.gpuSecondsUsed ?? 0],
      ...groupFacts(job),
      ...accessFacts(job.platformAccess),
    ];
    head.replaceChildren(
      ...facts.flatMap(([k, v]) => [
        h("dt", {}, k),
        h("dd", { className: k === "Command" ? "mono" : k === "Error" && job.errorMessage ? "error-text" : "" }, v instanceof Node ? v : String(v)),
      ]),
    );
  };
  const update = (next) => {
    job = next;
    show();
  };
  // The elapsed time counts on between status events.
  const tick = setInterval(() => job && !TERMINAL.has(job.status) && show(), 1000);
  signal.addEventListener("abort", () => clearInterval(tick));
  cancel.addEventListener("click", () => guarded(slot, async () => update(await api("POST", `/api/gpu/jobs/${encodeURIComponent(id)}/cancel`))));
  const path = `/api/gpu/jobs/${encodeURIComponent(id)}`;
  artifacts.addEventListener("click", () => guarded(slot, () => download(`${path}/artifacts`, `job-${id.slice(0, 8)}-artifacts.tar`, signal)));
  guarded(slot, () => streamEvents("GET", `${path}/events`, undefined, (name, data) => name === "status" && update(JSON.parse(data)), signal));
  // The output, once: what exists, then new lines as they are printed (the stream ends with the job).
  guarded(slot, () => stream("GET", `${path}/logs?follow=true`, undefined, (text) => log.append(text), signal));
  return h(
    "div",
    {},
    h("p", {}, h("a", { href: "#jobs" }, "← All jobs")),
    h("h1", {}, "Job ", h("span", { className: "mono" }, id.slice(0, 8)), " ", status),
    slot,
    h("section", { className: "card" }, head, h("p", { className: "row" }, cancel, artifacts), artifactsHint),
    h("section", { className: "card" }, h("h2", {}, "Output (live)"), log),
  );
}
