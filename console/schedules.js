// Schedules: the account's cron schedules of a job (GET /api/gpu/schedules, issue 30): cron and time
// zone, concurrency, paused, the next and last run, the last run's job and the ticks skipped; pause,
// resume and delete (docs/jobs.md). They are created with the CLI or the API (`schedules create`).
import { api } from "./api.js";
import { h, guarded, dataTable, fmtDate, copyLine } from "./ui.js";
import { every } from "./live.js";

function scheduleRow(s, act) {
  const toggle = h("button", { type: "button", "aria-label": `${s.paused ? "Resume" : "Pause"} schedule ${s.name}` }, s.paused ? "Resume" : "Pause");
  toggle.addEventListener("click", () => act(() => api("PATCH", `/api/gpu/schedules/${encodeURIComponent(s.id)}`, { paused: !s.paused })));
  const del = h("button", { type: "button", className: "danger", "aria-label": `Delete schedule ${s.name}` }, "Delete");
  del.addEventListener("click", () => act(() => api("DELETE", `/api/gpu/schedules/${encodeURIComponent(s.id)}`)));
  const lastJob = s.lastJobId ? h("a", { href: `#jobs/${encodeURIComponent(s.lastJobId)}`, className: "mono" }, s.lastJobId.slice(0, 8)) : "—";
  return h(
    "tr",
    { "data-id": s.id },
    h("td", {}, s.name),
    h("td", { className: "mono" }, s.cron),
    h("td", {}, s.timezone),
    h("td", {}, s.concurrency),
    h("td", {}, s.paused ? h("span", { className: "badge status-paused" }, "paused") : "active"),
    h("td", {}, s.paused ? "—" : fmtDate(s.nextRunAt)),
    h("td", {}, fmtDate(s.lastRunAt)),
    h("td", {}, lastJob),
    h("td", { title: "ticks skipped (forbid: the last run still going)" }, String(s.skipped)),
    h("td", { className: "row" }, toggle, del),
  );
}

export function schedulesPage(signal) {
  const slot = h("div");
  const body = h("tbody");
  const columns = ["Name", "Cron", "Time zone", "Concurrency", "State", "Next run", "Last run", "Last job", "Skipped", ""];
  const table = dataTable("Schedules", columns, body);
  const refresh = () =>
    guarded(slot, async () => {
      const { schedules } = await api("GET", "/api/gpu/schedules", undefined, signal);
      body.replaceChildren(
        ...(schedules.length
          ? schedules.map((s) => scheduleRow(s, act))
          : [h("tr", {}, h("td", { colspan: columns.length, className: "muted" }, "No schedules yet: create one with the command above."))]),
      );
    });
  // A pause, resume or delete, then the list as it is now.
  const act = (call) =>
    guarded(slot, async () => {
      await call();
      await refresh();
    });
  every(5000, signal, refresh);
  return h(
    "div",
    {},
    h("h1", {}, "Schedules"),
    h("p", { className: "muted" }, "A job run on a cron schedule in a time zone: each tick makes one job, shown on the Jobs page."),
    copyLine(`ci-platform schedules create --name nightly --cron '0 3 * * *' --tz Europe/Berlin -- python eval.py`),
    h("section", { className: "card" }, h("h2", {}, "Your schedules"), slot, h("div", { className: "scroll" }, table)),
  );
}
