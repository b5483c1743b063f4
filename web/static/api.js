// The HTTP API client (PROTOCOL.md, "HTTP API") and the stored session.
// The calls go through the SDK's ChatdClient (served at /sdk/): its
// request, error shape and timeout; the page's own calls are not retried.

import {ChatdClient, ChatdError, ClientCodes} from '/sdk/index.js';

const SESSION = 'chatd.session';
const ADMIN = 'chatd.admin';
const TOKENS = 'chatd.guests';

/** APIError is an answer in the documented error shape. */
export class APIError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** session keeps {token, user, lobby} in sessionStorage: one per tab. */
export const session = {
  load() {
    try {
      const s = JSON.parse(sessionStorage.getItem(SESSION) || 'null');
      return s && typeof s.token === 'string' && typeof s.user === 'string' ? s : null;
    } catch {
      return null;
    }
  },
  save(s) { sessionStorage.setItem(SESSION, JSON.stringify(s)); },
  clear() { sessionStorage.removeItem(SESSION); },
  adminToken() { return sessionStorage.getItem(ADMIN) || ''; },
  setAdminToken(t) {
    if (t) sessionStorage.setItem(ADMIN, t);
    else sessionStorage.removeItem(ADMIN);
  },
};

/**
 * guestTokens remembers, in localStorage, the latest token of each guest
 * name signed in on this browser, so that another tab of the same guest
 * asks for its session with it (the server then does not answer
 * name_taken to the guest who holds the name).
 */
export const guestTokens = {
  all() {
    try {
      const m = JSON.parse(localStorage.getItem(TOKENS) || '{}');
      return m && typeof m === 'object' ? m : {};
    } catch {
      return {};
    }
  },
  get(user) {
    const t = this.all()[user];
    return typeof t === 'string' ? t : undefined;
  },
  set(user, token) {
    const m = this.all();
    m[user] = token;
    const names = Object.keys(m);
    if (names.length > 20) delete m[names[0]];
    localStorage.setItem(TOKENS, JSON.stringify(m));
  },
  remove(user, token) {
    const m = this.all();
    if (m[user] === token) {
      delete m[user];
      localStorage.setItem(TOKENS, JSON.stringify(m));
    }
  },
};

/**
 * api calls /api/v1 + path with the bearer token and a JSON body, and
 * returns the decoded answer; a non-2xx answer throws an APIError carrying
 * the server's code and message (`network` when no answer came, `http_N`
 * for an answer not in the error shape).
 */
export async function api(method, path, {token, body} = {}) {
  const client = new ChatdClient({baseUrl: location.origin, token, retries: 0});
  try {
    return await client.request(method, path, {body});
  } catch (err) {
    if (!(err instanceof ChatdError)) throw err;
    if (err.code === ClientCodes.NETWORK) {
      throw new APIError(0, 'network', 'the server cannot be reached; check your connection');
    }
    if (err.code === ClientCodes.BAD_RESPONSE && err.status) {
      throw new APIError(err.status, `http_${err.status}`, 'request failed');
    }
    throw new APIError(err.status, err.code, err.message);
  }
}

/**
 * seg escapes one path segment. Names are already limited to
 * [A-Za-z0-9_.-] (and "@" in board names), so this only guards against
 * surprises; "@" stays as it is, a legal path character.
 */
export function seg(name) {
  return encodeURIComponent(name).replace(/%40/g, '@');
}

/** Name rules of PROTOCOL.md ("Names"). */
export const userName = /^[A-Za-z0-9_-]{1,32}$/;
export const lobbyName = /^[A-Za-z0-9_.-]{1,64}$/;
