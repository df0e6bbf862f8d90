// The console's shell: sign in / register, the navigation, and a hash router (#jobs, #jobs/<id>, #deployments/<id>, …).
import { api, session } from "./api.js";
import { h, guarded } from "./ui.js";
import { jobsPage } from "./jobs.js";
import { jobPage } from "./job-page.js";
import { clusterPage } from "./cluster.js";
import { modelsPage } from "./models.js";
import { databasesPage } from "./databases.js";
import { deploymentsPage } from "./deployments.js";
import { deploymentPage } from "./deployment-page.js";
import { batchesPage } from "./batches.js";
import { schedulesPage } from "./schedules.js";
import { usagePage } from "./usage.js";
import { settingsPage } from "./settings.js";

const PAGES = [
  ["jobs", "Jobs", jobsPage],
  ["schedules", "Schedules", schedulesPage],
  ["cluster", "Cluster", clusterPage],
  ["models", "Models", modelsPage],
  ["deployments", "Deployments", deploymentsPage],
  ["batches", "Batches", batchesPage],
  ["databases", "Databases", databasesPage],
  ["usage", "Usage", usagePage],
  ["settings", "Settings", settingsPage],
];

const main = document.getElementById("main");
const nav = document.getElementById("nav");
const who = document.getElementById("who");
// Aborts the streams and timers of the page being left.
let leaving = new AbortController();

function loginPage() {
  let mode = "login";
  const slot = h("div");
  const email = h("input", { id: "email", type: "email", autocomplete: "email", required: true });
  const password = h("input", { id: "password", type: "password", autocomplete: "current-password", required: true, minlength: 8 });
  const name = h("input", { id: "name", autocomplete: "name" });
  const nameRow = h("p", { hidden: true }, h("label", { for: "name" }, "Name"), name);
  const submit = h("button", { type: "submit" }, "Log in");
  const toggle = h("button", { type: "button", className: "link" }, "No account? Register");
  toggle.addEventListener("click", () => {
    mode = mode === "login" ? "register" : "login";
    nameRow.hidden = mode === "login";
    submit.textContent = mode === "login" ? "Log in" : "Register";
    toggle.textContent = mode === "login" ? "No account? Register" : "Have an account? Log in";
  });
  const form = h(
    "form",
    { className: "card narrow", "aria-label": "Sign in" },
    h("h1", {}, "Sign in to ci-platform"),
    h("p", {}, h("label", { for: "email" }, "Email"), email),
    h("p", {}, h("label", { for: "password" }, "Password"), password),
    nameRow,
    slot,
    h("p", { className: "row" }, submit, toggle),
  );
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    guarded(slot, async () => {
      const body = { email: email.value, password: password.value };
      if (mode === "register") body.name = name.value || email.value.split("@")[0];
      const res = await api("POST", mode === "login" ? "/api/auth/login" : "/api/auth/register", body);
      session.set(res.accessToken, res.client);
      if (!location.hash || location.hash === "#login") location.hash = "#jobs";
      else render();
    });
  });
  return form;
}

function renderNav(current) {
  if (!session.account) {
    nav.replaceChildren();
    who.replaceChildren();
    return;
  }
  nav.replaceChildren(...PAGES.map(([id, label]) => h("a", { href: `#${id}`, "aria-current": id === current ? "page" : undefined }, label)));
  const logout = h("button", { type: "button", className: "link" }, "Log out");
  logout.addEventListener("click", () => {
    session.clear();
    location.hash = "#login";
    render();
  });
  who.replaceChildren(h("span", { className: "muted" }, session.account.email), " ", logout);
}

function render() {
  leaving.abort();
  leaving = new AbortController();
  const [id, arg] = location.hash.slice(1).split("/");
  if (!session.account) {
    renderNav(null);
    main.replaceChildren(loginPage());
    document.getElementById("email")?.focus();
    return;
  }
  const page = PAGES.find(([pid]) => pid === id) ?? PAGES[0];
  renderNav(page[0]);
  const detail = { jobs: jobPage, deployments: deploymentPage }[page[0]];
  const view = detail && arg ? detail(decodeURIComponent(arg), leaving.signal) : page[2](leaving.signal);
  main.replaceChildren(view);
  main.focus({ preventScroll: true });
}

// The session ended by itself (its token expired or was refused): the login, saying why.
session.onExpired(() => {
  render();
  main.prepend(h("p", { className: "warning", role: "status" }, "Your session ended: sign in again."));
});
window.addEventListener("hashchange", render);
render();
