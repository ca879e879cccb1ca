// Every call goes to /v1 with the signed-in token as a bearer header; the
// token lives in this tab's sessionStorage (no cookies), so the console has
// exactly the token's rights.

const KEY = 'memd.token';

export const token = {
  get: () => sessionStorage.getItem(KEY),
  set: t => sessionStorage.setItem(KEY, t),
  clear: () => sessionStorage.removeItem(KEY),
};

/** An error reply: HTTP status, stable code, message. */
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** Calls `path`; resolves to the parsed JSON (or text), rejects with an ApiError. */
export async function call(method, path, body) {
  const headers = { Authorization: 'Bearer ' + (token.get() || '') };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let res;
  try {
    res = await fetch(path, {
      method, headers, credentials: 'omit', cache: 'no-store',
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (e) {
    throw new ApiError(0, 'NETWORK', 'memd is not reachable: ' + e.message);
  }
  const text = await res.text();
  let data = text;
  try { data = text ? JSON.parse(text) : null; } catch { /* not JSON: /metrics is text */ }
  if (!res.ok) {
    const e = (data && data.error) || {};
    throw new ApiError(res.status, e.code || 'HTTP_' + res.status, e.message || String(text).slice(0, 200));
  }
  return data;
}

export const get = path => call('GET', path);
export const post = (path, body) => call('POST', path, body || {});
