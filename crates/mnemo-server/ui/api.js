// The inspector's JSON endpoints. The token travels from the page's address on every call.

const token = new URLSearchParams(window.location.search).get('token') ?? '';

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

/** GET /api/<path> with `params`; resolves to the decoded JSON or throws ApiError. */
export async function get(path, params = {}) {
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== '') query.set(name, String(value));
  }
  const url = `/api/${path}${query.toString() ? '?' + query : ''}`;
  const response = await fetch(url, { headers: { 'X-Mnemo-Token': token }, cache: 'no-store' });
  let body = null;
  try {
    body = await response.json();
  } catch {
    throw new ApiError(response.status, `${url}: answer is not JSON (HTTP ${response.status})`);
  }
  if (!response.ok) throw new ApiError(response.status, body?.error ?? `HTTP ${response.status}`);
  return body;
}
