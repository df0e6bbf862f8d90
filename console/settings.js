// Settings: a new API key and a new webhook signing secret (each shown once; each replaces the previous one), and restricted tokens.
import { api } from "./api.js";
import { h, guarded, shownOnce } from "./ui.js";
import { tokensCard } from "./tokens.js";

function secretCard(title, text, button, call, label) {
  const slot = h("div");
  const out = h("div");
  const go = h("button", { type: "button" }, button);
  go.addEventListener("click", () => guarded(slot, async () => out.replaceChildren(shownOnce(title, [[label, await call()]]))));
  return h("section", { className: "card" }, h("h2", {}, title), h("p", {}, text), slot, go, out);
}

export function settingsPage() {
  return h(
    "div",
    {},
    h("h1", {}, "Settings"),
    secretCard(
      "API key",
      "For scripts and the SDK (X-API-Key or Authorization: Bearer). A new key replaces the previous one at once.",
      "Create API key",
      async () => (await api("POST", "/api/auth/api-keys")).apiKey,
      "API key",
    ),
    secretCard(
      "Webhook secret",
      "Signs the POSTs sent to a job's webhookUrl. A new secret replaces the previous one.",
      "Create webhook secret",
      async () => (await api("POST", "/api/auth/webhook-secret")).webhookSecret,
      "Webhook secret",
    ),
    tokensCard(),
  );
}
