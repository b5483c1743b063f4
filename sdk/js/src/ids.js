// Identifiers: message ids (PROTOCOL.md, "Message ids"), and the random
// keys and refs the client makes up.

const ID = /^(\d{1,20})-(\d{1,20})$/;

/**
 * normalizeId writes a message id zero-padded (13 digits of ms, `-`, 6 of
 * sequence), the form in which the ids of one room sort as strings. Ids
 * the server sends are padded already; a raw Redis id (`1796114764962-1`)
 * becomes `1796114764962-000001`. Anything else is returned unchanged.
 * @param {string} id
 * @returns {string}
 */
export function normalizeId(id) {
  const m = ID.exec(id);
  if (!m) return id;
  return `${m[1].padStart(13, '0')}-${m[2].padStart(6, '0')}`;
}

/**
 * compareIds orders two message ids of one room: negative when a was sent
 * before b, 0 when they are the same message, positive after.
 * @param {string} a
 * @param {string} b
 * @returns {number}
 */
export function compareIds(a, b) {
  const x = normalizeId(a);
  const y = normalizeId(b);
  if (x.length !== y.length) return x.length - y.length; // longer ms part: later
  return x < y ? -1 : x > y ? 1 : 0;
}

/**
 * randomHex is n random bytes as hex, from crypto.getRandomValues (present
 * in every browser, secure context or not, and in Node 20).
 * @param {number} n
 * @returns {string}
 */
export function randomHex(n) {
  const b = new Uint8Array(n);
  globalThis.crypto.getRandomValues(b);
  let s = '';
  for (const x of b) s += x.toString(16).padStart(2, '0');
  return s;
}

/**
 * newIdempotencyKey is a fresh Idempotency-Key: 128 random bits, well
 * inside the server's rule (1–128 printable ASCII bytes without spaces).
 * @returns {string}
 */
export function newIdempotencyKey() {
  return `k-${randomHex(16)}`;
}
