// Deployments: the account's model deployments (status, replicas desired/starting/ready, why), a
// form to create one (name, command, port, GPU type, min/max replicas) and delete (docs/deployments.md);
// a name leads to the deployment's own page (deployment-page.js).
import { api } from "./api.js";
import { h, guarded, dataTable, fmtDate, statusBadge, field } from "./ui.js";
import { every } from "./live.js";

function createForm(onCreated) {
  const slot = h("div");
  const name = h("input", { required: true, pattern: "[a-z0-9][a-z0-9\\-]{0,62}", placeholder: "qwen-small" });
  const command = h("textarea", { rows: 2, required: true, className: "mono", placeholder: "vllm serve Qwen/Qwen2.5-0.5B-Instruct --port 8000" });
  const port = h("input", { type: "number", min: 1024, max: 65535, required: true, value: 8000 });
  const gpuType = h("input", { placeholder: "any" });
  const min = h("input", { type: "number", min: 0, max: 10, value: 0 });
  const max = h("input", { type: "number", min: 1, max: 10, value: 1 });
  const form = h(
    "form",
    { className: "card", "aria-label": "Create a deployment" },
    h("h2", {}, "Create a deployment"),
    field("dep-name", "Name", name, "The model name requests use: lowercase letters, digits and -"),
    field("dep-command", "Command", command, "A server speaking OpenAI's HTTP API, listening on the port below"),
    h(
      "div",
      { className: "grid" },
      field("dep-port", "Port", port),
      field("dep-gpu-type", "GPU type", gpuType),
      field("dep-min", "Min replicas", min),
      field("dep-max", "Max replicas", max),
    ),
    slot,
    h("button", { type: "submit" }, "Create deployment"),
  );
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    guarded(slot, async () => {
      const body = {
        name: name.value.trim(),
        command: command.value,
        port: Number(port.value),
        minReplicas: Number(min.value),
        maxReplicas: Number(max.value),
      };
      if (gpuType.value.trim()) body.gpuType = gpuType.value.trim();
      await api("POST", "/api/deployments", body);
      name.value = "";
      onCreated();
    });
  });
  return form;
}

function deploymentRow(d, onDelete) {
  const del = h("button", { type: "button", className: "danger", "aria-label": `Delete deployment ${d.name}` }, "Delete");
  del.addEventListener("click", () => onDelete(d));
  const { desired, starting, ready } = d.replicas;
  return h(
    "tr",
    { "data-id": d.id },
    h("td", { className: "mono" }, h("a", { href: `#deployments/${encodeURIComponent(d.id)}` }, d.name)),
    h("td", {}, statusBadge(d.status)),
    h("td", { title: "desired / starting / ready" }, `${desired} / ${starting} / ${ready}`),
    h("td", {}, `${d.minReplicas}–${d.maxReplicas}`),
    h("td", {}, d.gpuType ?? "any", ` · port ${d.port}`),
    h("td", { className: "muted" }, d.statusReason ?? "—"),
    h("td", {}, fmtDate(d.createdAt)),
    h("td", {}, del),
  );
}

export function deploymentsPage(signal) {
  const slot = h("div");
  const body = h("tbody");
  const table = dataTable("Deployments", ["Name", "Status", "Replicas (desired / starting / ready)", "Min–max", "GPU", "Why", "Created", ""], body);
  const refresh = () =>
    guarded(slot, async () => {
      const { deployments } = await api("GET", "/api/deployments", undefined, signal);
      body.replaceChildren(
        ...(deployments.length
          ? deployments.map((d) => deploymentRow(d, remove))
          : [
              h(
                "tr",
                {},
                h("td", { colspan: 8, className: "muted" }, "No deployments yet: create one above; its name is then a model of /v1/chat/completions."),
              ),
            ]),
      );
    });
  const remove = (d) =>
    guarded(slot, async () => {
      await api("DELETE", `/api/deployments/${encodeURIComponent(d.id)}`);
      await refresh();
    });
  every(3000, signal, refresh);
  return h(
    "div",
    {},
    h("h1", {}, "Deployments"),
    h("p", { className: "muted" }, "Your own model servers, run as GPU jobs on demand and served at /v1 under their name."),
    createForm(refresh),
    h("section", { className: "card" }, h("h2", {}, "Your deployments"), slot, h("div", { className: "scroll" }, table)),
  );
}
