// Backoff and waiting: exponential backoff with full jitter (a delay drawn
// uniformly from 0 to min(max, base·2^attempt)), so that many clients that
// lost the same node do not come back in step, and a sleep that an
// AbortSignal cuts short.

import {abortError} from './errors.js';

/**
 * @typedef {object} BackoffOptions
 * @property {number} [base] ms: the ceiling of the first retry (default 500)
 * @property {number} [max] ms: the largest ceiling (default 15000)
 * @property {() => number} [random] a number in [0, 1) (default Math.random)
 */

/**
 * backoffDelay is the full-jitter delay before retry number attempt
 * (0 for the first retry): uniform in [0, min(max, base·2^attempt)).
 * @param {number} attempt
 * @param {BackoffOptions} [o]
 * @returns {number} ms
 */
export function backoffDelay(attempt, o = {}) {
  const base = o.base ?? 500;
  const max = o.max ?? 15000;
  const random = o.random ?? Math.random;
  const ceiling = Math.min(max, base * 2 ** Math.min(Math.max(0, attempt), 30));
  return Math.floor(random() * ceiling);
}

/**
 * sleep waits ms, or rejects with a ChatdError of code `aborted` as soon as
 * signal fires.
 * @param {number} ms
 * @param {AbortSignal} [signal]
 * @returns {Promise<void>}
 */
export function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(abortError(signal));
      return;
    }
    const done = () => {
      signal?.removeEventListener('abort', stop);
      resolve();
    };
    const timer = setTimeout(done, Math.max(0, ms));
    const stop = () => {
      clearTimeout(timer);
      reject(abortError(/** @type {AbortSignal} */ (signal)));
    };
    signal?.addEventListener('abort', stop, {once: true});
  });
}

/**
 * linkSignals is a signal that fires when any of signals fires, or after
 * timeout ms (when given); release detaches it from its parents.
 * (AbortSignal.any is not in every browser this SDK supports.)
 * @param {(AbortSignal | undefined)[]} signals
 * @param {number} [timeout] ms
 * @returns {{signal: AbortSignal, release: () => void}}
 */
export function linkSignals(signals, timeout) {
  const ctl = new AbortController();
  /** @type {(() => void)[]} */
  const undo = [];
  for (const s of signals) {
    if (!s) continue;
    if (s.aborted) {
      ctl.abort(s.reason);
      break;
    }
    const f = () => ctl.abort(s.reason);
    s.addEventListener('abort', f, {once: true});
    undo.push(() => s.removeEventListener('abort', f));
  }
  if (timeout !== undefined && !ctl.signal.aborted) {
    const t = setTimeout(() => ctl.abort(new DOMException('the request timed out', 'TimeoutError')), timeout);
    undo.push(() => clearTimeout(t));
  }
  return {signal: ctl.signal, release: () => undo.forEach((f) => f())};
}
