// The API client: errors become ApiError with the API's own message, streams are read with fetch
// (EventSource sends no headers). The session is kept in sessionStorage (this tab only, gone when
// it closes; never localStorage) so a reload keeps it, and forgotten at the token's expiry or the
// first 401 (docs/clients.md "Web console": the rules).
const KEY = "ci-platform.session";
let token = null;
let account = null;
let expiresAt = 0;
let onExpired = () => {};

/** The JWT's `exp` (ms); a token that is not one (a key) is kept for the tab's life. */
function expiryOf(accessToken) {
  try {
    const claims = JSON.parse(atob(accessToken.split(".")[1].replace(/-/g, "+").replace(/_/g, "/")));
    return typeof claims.exp === "number" ? claims.exp * 1000 : Infinity;
  } catch {
    return Infinity;
  }
}

function restore() {
  try {
    const saved = JSON.parse(sessionStorage.getItem(KEY) ?? "null");
    if (saved && typeof saved.token === "string" && expiryOf(saved.token) > Date.now()) {
      token = saved.token;
      account = saved.account;
      expiresAt = expiryOf(saved.token);
    } else sessionStorage.removeItem(KEY);
  } catch {
    sessionStorage.removeItem(KEY);
  }
}
restore();

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
  get token() {
    return token;
  },
  set(accessToken, client) {
    token = accessToken;
    account = client;
    expiresAt = expiryOf(accessToken);
    sessionStorage.setItem(KEY, JSON.stringify({ token, account }));
  },
  clear() {
    token = null;
    account = null;
    expiresAt = 0;
    sessionStorage.removeItem(KEY);
  },
  /** Called once the session has ended by itself (expired, or refused with 401): the shell shows the login. */
  onExpired(run) {
    onExpired = run;
  },
};

/** An expired token is never sent: the session ends and the login shows. */
function checkExpiry() {
  if (token && expiresAt <= Date.now()) {
    session.clear();
    onExpired();
  }
}

function headers(body) {
  const h = {};
  if (token) h.Authorization = `Bearer ${token}`;
  if (body !== undefined) h["Content-Type"] = "application/json";
  return h;
}

async function failure(res) {
  // The session's token refused (expired, revoked, password changed): forget it and sign in again.
  if (res.status === 401 && token) {
    session.clear();
    onExpired();
  }
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
  checkExpiry();
  const res = await fetch(path, { method, headers: headers(body), body: body === undefined ? undefined : JSON.stringify(body), signal });
  if (!res.ok) throw await failure(res);
  const text = await res.text();
  return text ? JSON.parse(text) : null;
}

/** A file the API serves behind the session's token, saved by the browser as `name` (a link cannot send the header). */
export async function download(path, name, signal) {
  checkExpiry();
  const res = await fetch(path, { headers: headers(), signal });
  if (!res.ok) throw await failure(res);
  const url = URL.createObjectURL(await res.blob());
  const link = Object.assign(document.createElement("a"), { href: url, download: name });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

/** Calls `onText` with each decoded piece of a streamed answer until it ends or `signal` aborts. */
export async function stream(method, path, body, onText, signal) {
  checkExpiry();
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
