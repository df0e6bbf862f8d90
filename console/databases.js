// Databases: create (password and connection string shown once), the list with storage bars,
// snapshots, password rotation, point-in-time restore (shown restoring until active), and destroy
// behind a typed confirmation.
import { api } from "./api.js";
import { h, guarded, bar, shownOnce, fmtDate, statusBadge } from "./ui.js";
import { restorePicker } from "./database-restore.js";

const RESTORING_POLL_MS = 3000;

export function databasesPage(signal) {
  const slot = h("div");
  const secret = h("div");
  const rows = h("div", { className: "dbs" });
  const snaps = h("tbody");
  const maxMb = h("input", { id: "db-max", type: "number", min: 1, placeholder: "server default" });

  let again;
  signal.addEventListener("abort", () => clearTimeout(again));
  const refresh = () =>
    guarded(slot, async () => {
      clearTimeout(again);
      const [{ databases }, { snapshots }] = await Promise.all([
        api("GET", "/api/databases", undefined, signal),
        api("GET", "/api/snapshots", undefined, signal),
      ]);
      rows.replaceChildren(...(databases.length ? databases.map(dbCard) : [h("p", { className: "muted" }, "No databases yet")]));
      // A restore fills its database in the background: look again until none is restoring.
      if (databases.some((db) => db.status === "restoring") && !signal.aborted) again = setTimeout(refresh, RESTORING_POLL_MS);
      snaps.replaceChildren(
        ...snapshots.map((s) =>
          h(
            "tr",
            {},
            h("td", { className: "mono" }, s.id.slice(0, 8)),
            h("td", { className: "mono" }, s.databaseName),
            h("td", {}, statusBadge(s.status)),
            h("td", {}, `${s.sizeMb} MB`),
            h("td", {}, fmtDate(s.createdAt)),
            h(
              "td",
              {},
              h(
                "button",
                {
                  type: "button",
                  disabled: s.status !== "ready",
                  onclick: () =>
                    act(
                      () => api("POST", "/api/databases", { fromSnapshot: s.id }),
                      (db) => showCredentials("Branch created", db),
                    ),
                },
                "Branch",
              ),
              " ",
              h("button", { type: "button", onclick: () => act(() => api("DELETE", `/api/snapshots/${encodeURIComponent(s.id)}`)) }, "Delete"),
            ),
          ),
        ),
      );
    });

  const act = (call, then) =>
    guarded(slot, async () => {
      const res = await call();
      then?.(res);
      await refresh();
    });

  const showCredentials = (title, db) =>
    secret.replaceChildren(
      shownOnce(title, [
        ["Password", db.password],
        ["Connection string", db.connectionString],
        ...(db.pooledConnectionString ? [["Pooled connection string", db.pooledConnectionString]] : []),
      ]),
    );

  function dbCard(db) {
    const confirm = h("input", { "aria-label": `Type ${db.databaseName} to confirm`, placeholder: db.databaseName, className: "mono", autocomplete: "off" });
    const destroy = h("button", { type: "button", className: "danger", disabled: true }, "Destroy");
    confirm.addEventListener("input", () => (destroy.disabled = confirm.value !== db.databaseName));
    destroy.addEventListener("click", () =>
      act(
        () => api("DELETE", `/api/databases/${encodeURIComponent(db.id)}`),
        () => secret.replaceChildren(),
      ),
    );
    const danger = h(
      "details",
      { className: "danger-zone" },
      h("summary", {}, "Destroy…"),
      h("p", {}, "This deletes the database and its data. Type ", h("strong", { className: "mono" }, db.databaseName), " to confirm."),
      h("p", { className: "row" }, confirm, destroy),
    );
    const status = db.status ?? "active";
    const usable = status === "active";
    return h(
      "article",
      { className: "card db", "aria-label": db.databaseName },
      h("h3", { className: "mono" }, db.databaseName, db.readOnly ? h("span", { className: "badge status-failed" }, "read-only") : null),
      h(
        "p",
        { className: "db-status" },
        statusBadge(status),
        status === "restoring" ? h("span", { className: "muted", role: "status" }, " Restoring its data: usable once active.") : null,
      ),
      db.statusReason ? h("p", { className: "error", role: "note" }, `Restore failed: ${db.statusReason}. Destroy it.`) : null,
      h("p", { className: "muted mono" }, `${db.username}@${db.host}:${db.port} · created ${fmtDate(db.createdAt)}`),
      db.pooledPort ? h("p", { className: "muted mono" }, `pooled (transaction mode): ${db.username}@${db.pooledHost}:${db.pooledPort}`) : null,
      bar("Storage", db.storageMb, db.maxStorageMb, `${Number(db.storageMb).toFixed(1)} / ${db.maxStorageMb} MB`),
      h(
        "p",
        { className: "row", hidden: !usable },
        h("button", { type: "button", onclick: () => act(() => api("POST", `/api/databases/${encodeURIComponent(db.id)}/snapshots`)) }, "Snapshot"),
        h(
          "button",
          {
            type: "button",
            onclick: () =>
              act(
                () => api("POST", `/api/databases/${encodeURIComponent(db.id)}/rotate-password`),
                (r) => showCredentials("New password", r),
              ),
          },
          "Rotate password",
        ),
      ),
      restorePicker(db, (timestamp) =>
        act(
          () => api("POST", "/api/databases", { restoreFrom: { databaseId: db.id, timestamp } }),
          (r) => showCredentials("Restoring into a new database", r),
        ),
      ),
      status === "restoring" ? null : danger,
    );
  }

  const create = h(
    "form",
    { className: "card", "aria-label": "Create a database" },
    h("h2", {}, "New PostgreSQL database"),
    h("p", {}, h("label", { for: "db-max" }, "Storage limit (MB)"), maxMb),
    h("button", { type: "submit" }, "Create database"),
  );
  create.addEventListener("submit", (e) => {
    e.preventDefault();
    act(
      () => api("POST", "/api/databases", maxMb.value ? { maxStorageMb: Number(maxMb.value) } : {}),
      (db) => showCredentials("Database created", db),
    );
  });
  refresh();
  const snapTable = h(
    "table",
    { "aria-label": "Snapshots" },
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        ["Snapshot", "Database", "Status", "Size", "Created", ""].map((c) => h("th", { scope: "col" }, c)),
      ),
    ),
    snaps,
  );
  return h(
    "div",
    {},
    h("h1", {}, "Databases"),
    slot,
    secret,
    create,
    rows,
    h(
      "section",
      { className: "card" },
      h("h2", {}, "Snapshots"),
      h("button", { type: "button", onclick: refresh }, "Refresh"),
      h("div", { className: "scroll" }, snapTable),
    ),
  );
}
