// Settings → Tokens: the account's restricted tokens (cit_…, never their secrets), a form to make one
// (scopes, models, databases, lifetime, credit limit; the token shown once) and delete.
import { api } from "./api.js";
import { h, guarded, shownOnce, fmtDate } from "./ui.js";

export const SCOPES = ["jobs:read", "jobs:write", "inference", "databases:read", "databases:write", "usage:read"];
const EXPIRIES = [
  ["1 hour", 3600],
  ["1 day", 86400],
  ["7 days", 604800],
  ["30 days", 2592000],
  ["1 year", 31536000],
];

/** "a, b" → ["a", "b"], or undefined when blank (no limit). */
const listOf = (text) => {
  const items = text
    .split(",")
    .map((x) => x.trim())
    .filter(Boolean);
  return items.length ? items : undefined;
};

function tokenRow(token, onDelete) {
  const del = h("button", { type: "button", className: "danger", "aria-label": `Delete token ${token.name}` }, "Delete");
  del.addEventListener("click", () => onDelete(token));
  return h(
    "tr",
    {},
    h("td", {}, token.name),
    h("td", { className: "mono" }, token.scopes.join(", ")),
    h("td", {}, [token.models?.join(", "), token.databases?.length ? `${token.databases.length} database(s)` : null].filter(Boolean).join(" · ") || "—"),
    h("td", {}, fmtDate(token.expiresAt)),
    h("td", {}, `${token.creditsUsed} / ${token.maxCredits ?? "∞"}`),
    h("td", {}, fmtDate(token.lastUsedAt)),
    h("td", {}, token.jobId ? h("a", { href: `#jobs/${encodeURIComponent(token.jobId)}`, className: "mono" }, token.jobId.slice(0, 8)) : "—"),
    h("td", {}, del),
  );
}

function createForm(slot, out, onCreated) {
  const name = h("input", { id: "token-name", required: true, maxlength: 64, placeholder: "nightly eval" });
  const boxes = SCOPES.map((scope) => h("input", { type: "checkbox", value: scope, id: `token-scope-${scope.replace(":", "-")}` }));
  const models = h("input", { id: "token-models", placeholder: "all models" });
  const databases = h("input", { id: "token-databases", placeholder: "all databases", className: "mono" });
  const expiry = h("select", { id: "token-expiry" }, ...EXPIRIES.map(([label, s]) => h("option", { value: s, selected: s === 86400 }, label)));
  const credits = h("input", { id: "token-credits", type: "number", min: 0, step: "any", placeholder: "no limit" });
  const form = h(
    "form",
    { "aria-label": "Create a token" },
    h("p", {}, h("label", { for: "token-name" }, "Name"), name),
    h(
      "fieldset",
      { className: "scopes" },
      h("legend", {}, "Scopes"),
      boxes.map((box) => h("label", { className: "check", for: box.id }, box, box.value)),
    ),
    h(
      "div",
      { className: "grid" },
      h("p", {}, h("label", { for: "token-models" }, "Models (comma list)"), models),
      h("p", {}, h("label", { for: "token-databases" }, "Database ids (comma list)"), databases),
      h("p", {}, h("label", { for: "token-expiry" }, "Expires in"), expiry),
      h("p", {}, h("label", { for: "token-credits" }, "Max credits"), credits),
    ),
    h("button", { type: "submit" }, "Create token"),
  );
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    guarded(slot, async () => {
      const body = { name: name.value.trim(), scopes: boxes.filter((b) => b.checked).map((b) => b.value), expiresInSeconds: Number(expiry.value) };
      if (listOf(models.value)) body.models = listOf(models.value);
      if (listOf(databases.value)) body.databases = listOf(databases.value);
      if (credits.value !== "") body.maxCredits = Number(credits.value);
      const created = await api("POST", "/api/auth/tokens", body);
      out.replaceChildren(shownOnce(`Token ${created.name}`, [["Token", created.token]]));
      form.reset();
      onCreated();
    });
  });
  return form;
}

export function tokensCard() {
  const slot = h("div");
  const out = h("div");
  const body = h("tbody");
  const head = ["Name", "Scopes", "Limited to", "Expires", "Credits used / max", "Last used", "Job", ""];
  const table = h(
    "table",
    { "aria-label": "Tokens" },
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        head.map((c) => h("th", { scope: "col" }, c)),
      ),
    ),
    body,
  );
  const refresh = () =>
    guarded(slot, async () => {
      const { tokens } = await api("GET", "/api/auth/tokens");
      const remove = (t) => guarded(slot, async () => (await api("DELETE", `/api/auth/tokens/${encodeURIComponent(t.id)}`), out.replaceChildren(), refresh()));
      body.replaceChildren(
        ...(tokens.length ? tokens.map((t) => tokenRow(t, remove)) : [h("tr", {}, h("td", { colspan: head.length, className: "muted" }, "No tokens yet"))]),
      );
    });
  refresh();
  return h(
    "section",
    { className: "card" },
    h("h2", {}, "Tokens"),
    h("p", {}, "Restricted tokens (cit_…) for scripts, CI and agents: only the scopes, models and databases chosen, until they expire or are deleted."),
    createForm(slot, out, refresh),
    slot,
    out,
    h("div", { className: "scroll" }, table),
  );
}
