// JSON API calls (/api/...). Errors carry the server's field name and message.

export class ApiError extends Error {
  constructor(status, field, message) {
    super(message);
    this.status = status;
    this.field = field;
  }
}

async function call(method, path, body) {
  const res = await fetch(path, {
    method,
    headers: body ? { "Content-Type": "application/json" } : {},
    body: body ? JSON.stringify(body) : undefined,
  });
  const data = await res.json().catch(() => null);
  if (!res.ok) {
    const first = data && data.detail && data.detail[0];
    const msg = (data && (data.message || (first && first.msg))) || res.statusText;
    throw new ApiError(res.status, data ? data.field : "", msg);
  }
  return data;
}

export const api = {
  catalog: () => call("GET", "/api/catalog"),
  simulate: (req) => call("POST", "/api/simulate", req),
  estimate: (req) => call("POST", "/api/estimate", req),
  trace: (req) => call("POST", "/api/trace", req),
  studies: () => call("GET", "/api/studies"),
  front: (name) => call("GET", `/api/studies/${encodeURIComponent(name)}/front`),
  serving: (name) => call("GET", `/api/studies/${encodeURIComponent(name)}/serving`),
};

/** Offer `data` as a JSON file download. */
export function download(name, data) {
  const blob = new Blob([JSON.stringify(data)], { type: "application/json" });
  const a = document.createElement("a");
  a.href = URL.createObjectURL(blob);
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 1000);
}
