// Batches: the account's OpenAI Batch API batches (GET /v1/batches): status, request counts, and
// the input, output and error files downloaded behind the session's token (docs/inference.md).
import { api, download } from "./api.js";
import { h, guarded, dataTable, statusBadge, copyLine } from "./ui.js";
import { every } from "./live.js";

const fromUnix = (s) => (s ? new Date(s * 1000).toLocaleString() : "—");

function fileCell(id, label, slot, signal) {
  if (!id) return h("td", { className: "muted" }, "—");
  const get = h("button", { type: "button", className: "link", "aria-label": `Download ${label} file ${id}` }, id.slice(0, 14) + "…");
  get.addEventListener("click", () => guarded(slot, () => download(`/v1/files/${encodeURIComponent(id)}/content`, `${id}.jsonl`, signal)));
  return h("td", { className: "mono" }, get);
}

function batchRow(b, slot, signal) {
  const c = b.request_counts ?? { total: 0, completed: 0, failed: 0 };
  return h(
    "tr",
    { "data-id": b.id },
    h("td", { className: "mono" }, b.id),
    h("td", {}, statusBadge(b.status)),
    h("td", { className: "mono" }, b.endpoint),
    h("td", { title: "completed / failed of total" }, `${c.completed} ✓ · ${c.failed} ✗ / ${c.total}`),
    fileCell(b.input_file_id, "input", slot, signal),
    fileCell(b.output_file_id, "output", slot, signal),
    fileCell(b.error_file_id, "error", slot, signal),
    h("td", {}, fromUnix(b.created_at)),
  );
}

export function batchesPage(signal) {
  const slot = h("div");
  const body = h("tbody");
  const table = dataTable("Batches", ["Batch", "Status", "Endpoint", "Requests", "Input", "Output", "Errors", "Created"], body);
  every(3000, signal, () =>
    guarded(slot, async () => {
      const { data } = await api("GET", "/v1/batches", undefined, signal);
      body.replaceChildren(
        ...(data.length ? data.map((b) => batchRow(b, slot, signal)) : [h("tr", {}, h("td", { colspan: 8, className: "muted" }, "No batches yet"))]),
      );
    }),
  );
  return h(
    "div",
    {},
    h("h1", {}, "Batches"),
    h(
      "section",
      { className: "card" },
      h(
        "p",
        {},
        "Many requests at a reduced price (BATCH_CREDIT_FACTOR, half by default), run behind interactive traffic: upload a JSONL file, then create a batch (OpenAI's Batch API, any OpenAI client):",
      ),
      copyLine('curl -H "Authorization: Bearer $KEY" -F purpose=batch -F file=@requests.jsonl $URL/v1/files'),
      copyLine(
        `curl -H "Authorization: Bearer $KEY" -H 'content-type: application/json' -d '{"input_file_id":"file-…","endpoint":"/v1/chat/completions","completion_window":"24h"}' $URL/v1/batches`,
      ),
    ),
    h("section", { className: "card" }, h("h2", {}, "Your batches"), slot, h("div", { className: "scroll" }, table)),
  );
}
