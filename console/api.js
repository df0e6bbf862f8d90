// The API client: the session lives in this module's memory only (never localStorage), errors
// become ApiError with the API's own message, streams are read with fetch (EventSource sends no headers).
let token = null;
let account = null;

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export const session = {
  get account() {
    return account;
  },
  set(accessToken, client) {
    token = accessToken;
    account = client;
  },
  clear() {
    token = null;
    account = null;
  },
};

function headers(body) {
  const h = {};
  if (token) h.Authorization = `Bearer ${token}`;
  if (body !== undefined) h["Content-Type"] = "application/json";
  return h;
}

async function failure(res) {
  const text = await res.text();
  let error;
  try {
    error = JSON.parse(text).error;
  } catch {
    error = undefined;
  }
  // A validation failure's details say which field and why: shown with the message.
  const reasons = Array.isArray(error?.details) ? error.details.map((d) => d?.message ?? d?.field).filter((r) => typeof r === "string") : [];
  const message = (error?.message ?? (text || res.statusText)) + (reasons.length ? `: ${reasons.join("; ")}` : "");
  return new ApiError(res.status, error?.code ?? "HTTP_" + res.status, message);
}

/** One JSON call; throws ApiError with the API's message. */
export async function api(method, path, body, signal) {
  const res = await fetch(path, { method, headers: headers(body), body: body === undefined ? undefined : JSON.stringify(body), signal });
  if (!res.ok) throw await failure(res);
  const text = await res.text();
  return text ? JSON.parse(text) : null;
}

/** Calls `onText` with each decoded piece of a streamed answer until it ends or `signal` aborts. */
export async function stream(method, path, body, onText, signal) {
  const res = await fetch(path, { method, headers: headers(body), body: body === undefined ? undefined : JSON.stringify(body), signal });
  if (!res.ok) throw await failure(res);
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    onText(decoder.decode(value, { stream: true }));
  }
}

/** Server-sent events over `stream`: calls `onEvent(name, data)` for each event (comments skipped). */
export function streamEvents(method, path, body, onEvent, signal) {
  let buffer = "";
  return stream(
    method,
    path,
    body,
    (text) => {
      buffer += text;
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        let name = "message";
        const data = [];
        for (const line of block.split("\n")) {
          if (line.startsWith("event:")) name = line.slice(6).trim();
          else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
        }
        if (data.length) onEvent(name, data.join("\n"));
      }
    },
    signal,
  );
}
