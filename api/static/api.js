// Calls to the REST API (/v1), with its errors turned into messages that keep the API's reason.

export class ApiError extends Error {
  constructor(method, path, status, detail, name) {
    super(`${method} ${path} answered ${status}: ${detail}${name ? ` (${name})` : ""}`);
    this.status = status;
    this.detail = detail;
    this.name = "ApiError";
  }
}

/** The reason of an error body: the API's `detail` (a string, or FastAPI's list of located field errors). */
export function reason(body, text) {
  if (body && typeof body.detail === "string") return body.detail;
  if (body && Array.isArray(body.detail)) {
    return body.detail.map((e) => `${(e.loc || []).slice(1).join(".") || "body"}: ${e.msg}`).join("; ");
  }
  return text || "no reason given";
}

/** `method path` with an optional JSON body; the parsed JSON (or text) answer, or an ApiError. */
export async function call(method, path, body, { text = false } = {}) {
  const init = { method, headers: { Accept: text ? "text/plain" : "application/json" } };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers["Content-Type"] = "application/json";
  }
  let res;
  try {
    res = await fetch(path, init);
  } catch (err) {
    throw new ApiError(method, path, "no answer", `the API is unreachable (${err.message})`);
  }
  const raw = await res.text();
  let parsed = null;
  try {
    parsed = raw ? JSON.parse(raw) : null;
  } catch {
    parsed = null;
  }
  if (!res.ok) throw new ApiError(method, path, res.status, reason(parsed, raw), parsed && parsed.error);
  return text ? raw : parsed;
}

export const get = (path, opts) => call("GET", path, undefined, opts);
export const post = (path, body) => call("POST", path, body);
