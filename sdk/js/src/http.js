// The HTTP core: one request to /api/v1 with the bearer token and a JSON
// body, the documented error shape turned into a ChatdError, and retries
// (exponential backoff with full jitter, Retry-After honoured) for the
// requests that may be repeated safely.

import {ChatdError, ClientCodes, abortError, retryAfterSeconds} from './errors.js';
import {backoffDelay, linkSignals, sleep} from './backoff.js';

/** @typedef {import('./backoff.js').BackoffOptions} BackoffOptions */

/**
 * @typedef {object} RetryInfo
 * @property {ChatdError} error what failed
 * @property {number} attempt 0 for the first retry
 * @property {number} delay ms until the retry
 */

/**
 * @typedef {object} HttpOptions
 * @property {string} [baseUrl] the server's origin (and path prefix, if any), e.g. `https://chat.example.com`
 * @property {string[]} [baseUrls] several nodes (or balancers) to use in turn, instead of baseUrl: requests go to
 *   the current one, and a failure that says it is down (no answer, 502, 503, 504) moves to the next
 * @property {() => string | undefined} token the bearer token to send, read at each request
 * @property {typeof fetch} [fetch] default globalThis.fetch
 * @property {number} [retries] retries of a retryable request (default 2)
 * @property {BackoffOptions} [backoff] delays between retries (default base 250 ms, max 5 s)
 * @property {number} [maxRetryAfter] s: a Retry-After longer than this is not waited out but thrown (default 30)
 * @property {number} [timeout] ms a request may take before it counts as a network failure (default 30000; long polls add their wait)
 * @property {(info: RetryInfo) => void} [onRetry] told before each retry
 */

/**
 * @typedef {object} RequestOptions
 * @property {Record<string, string | number | undefined>} [query]
 * @property {unknown} [body] sent as JSON
 * @property {AbortSignal} [signal]
 * @property {string} [idempotencyKey] sent as Idempotency-Key, the same on every retry
 * @property {boolean} [retry] whether a retryable failure is retried (idempotent requests only)
 * @property {number} [timeout] ms, instead of the client's
 * @property {string | null} [token] this token instead of the client's (null: none)
 */

export class Http {
  /** @param {HttpOptions} o */
  constructor(o) {
    const urls = o.baseUrls?.length ? o.baseUrls : o.baseUrl ? [o.baseUrl] : [];
    if (urls.length === 0 || urls.some((u) => typeof u !== 'string' || u === '')) {
      throw new TypeError('chatd: baseUrl (or baseUrls) is required, e.g. "https://chat.example.com"');
    }
    /** the base URLs, in the order they are tried */
    this.urls = urls.map((u) => u.replace(/\/+$/, ''));
    /** @private index of the base URL in use */
    this.current = 0;
    this.token = o.token;
    const f = o.fetch ?? globalThis.fetch;
    if (typeof f !== 'function') throw new TypeError('chatd: no fetch: pass the fetch option');
    /** @type {typeof fetch} */
    this.fetch = f;
    this.retries = o.retries ?? 2;
    this.backoff = o.backoff ?? {base: 250, max: 5000};
    this.maxRetryAfter = o.maxRetryAfter ?? 30;
    this.timeout = o.timeout ?? 30000;
    this.onRetry = o.onRetry;
  }

  /** baseUrl is the base URL in use: the first one until a request to it failed. */
  get baseUrl() {
    return this.urls[this.current];
  }

  /**
   * failed moves to the next base URL after one that seems down — unless
   * another request moved already.
   * @param {string} base
   * @private
   */
  failed(base) {
    if (this.urls.length > 1 && this.urls[this.current] === base) {
      this.current = (this.current + 1) % this.urls.length;
    }
  }

  /**
   * request calls method /api/v1+path and returns the decoded answer;
   * a non-2xx answer throws a ChatdError with the server's code.
   * @param {string} method
   * @param {string} path under /api/v1, starting with /
   * @param {RequestOptions} [o]
   * @returns {Promise<any>}
   */
  async request(method, path, o = {}) {
    for (let attempt = 0; ; attempt++) {
      const base = this.baseUrl;
      try {
        return await this.once(method, path, o, base);
      } catch (err) {
        const e = /** @type {ChatdError} */ (err);
        // A node that does not answer, or a balancer that says its node
        // does not: the next request (this one's retry, or the next call)
        // goes to the next base URL.
        if (e.code === ClientCodes.NETWORK || e.status === 502 || e.status === 503 || e.status === 504) this.failed(base);
        if (!o.retry || !e.retryable || attempt >= this.retries || o.signal?.aborted) throw e;
        let delay = backoffDelay(attempt, this.backoff);
        if (e.retryAfter !== undefined) {
          if (e.retryAfter > this.maxRetryAfter) throw e;
          delay = Math.max(delay, e.retryAfter * 1000);
        }
        this.onRetry?.({error: e, attempt, delay});
        await sleep(delay, o.signal);
      }
    }
  }

  /**
   * url is the address of path with query (undefined values left out).
   * @param {string} path
   * @param {Record<string, string | number | undefined>} [query]
   * @param {string} [base] default the base URL in use
   */
  url(path, query, base = this.baseUrl) {
    let u = `${base}/api/v1${path}`;
    if (query) {
      const q = new URLSearchParams();
      for (const [k, v] of Object.entries(query)) if (v !== undefined) q.set(k, String(v));
      const s = q.toString();
      if (s) u += `?${s}`;
    }
    return u;
  }

  /**
   * @param {string} method
   * @param {string} path
   * @param {RequestOptions} o
   * @param {string} base
   */
  async once(method, path, o, base) {
    if (o.signal?.aborted) throw abortError(o.signal);
    /** @type {Record<string, string>} */
    const headers = {Accept: 'application/json'};
    const token = o.token === undefined ? this.token() : o.token;
    if (token) headers.Authorization = `Bearer ${token}`;
    if (o.body !== undefined) headers['Content-Type'] = 'application/json';
    if (o.idempotencyKey) headers['Idempotency-Key'] = o.idempotencyKey;
    const link = linkSignals([o.signal], o.timeout ?? this.timeout);
    const f = this.fetch;
    let res;
    let text;
    try {
      res = await f(this.url(path, o.query, base), {
        method,
        headers,
        body: o.body === undefined ? undefined : JSON.stringify(o.body),
        signal: link.signal,
      });
      text = await res.text();
    } catch (err) {
      if (o.signal?.aborted) throw abortError(o.signal);
      const timedOut = link.signal.aborted;
      throw new ChatdError({
        code: ClientCodes.NETWORK,
        message: timedOut ? `${method} ${path}: no answer in time` : `${method} ${path}: the server cannot be reached`,
        cause: err,
      });
    } finally {
      link.release();
    }
    /** @type {any} */
    let data;
    try {
      data = text === '' ? null : JSON.parse(text);
    } catch {
      data = undefined;
    }
    if (!res.ok) {
      const e = data && typeof data === 'object' && data.error && typeof data.error.code === 'string' ? data.error : null;
      throw new ChatdError({
        code: e ? e.code : ClientCodes.BAD_RESPONSE,
        message: e ? String(e.message || e.code) : `${method} ${path}: HTTP ${res.status} without the error shape`,
        status: res.status,
        retryAfter: retryAfterSeconds(res.headers.get('Retry-After')),
      });
    }
    if (data === undefined) {
      throw new ChatdError({code: ClientCodes.BAD_RESPONSE, message: `${method} ${path}: the answer is not JSON`, status: res.status});
    }
    return data;
  }
}

/**
 * seg escapes one path segment. Names are limited to [A-Za-z0-9_.-] (and
 * `@` in board names), so this only guards against surprises.
 * @param {string} name
 * @returns {string}
 */
export function seg(name) {
  return encodeURIComponent(name).replace(/%40/g, '@');
}
