// Close codes (PROTOCOL.md, "Keep-alive, limits and close codes") mapped
// to typed reasons and to what the client does next.

/** The close codes the server sends. */
export const CloseCodes = Object.freeze({
  NORMAL: 1000,
  GOING_AWAY: 1001,
  ABNORMAL: 1006, // no close frame: the connection broke (the browser's and undici's code)
  POLICY: 1008,
  TOO_BIG: 1009,
  INTERNAL: 1011,
  DRAINING: 1012,
  TRY_LATER: 1013,
  SESSION_ENDED: 4000,
  KICKED: 4001,
  BANNED: 4003,
});

/** Why a connection closed. */
export const CloseReasons = Object.freeze({
  /** 1000: closed normally. */
  NORMAL: 'normal',
  /** 1001 */
  GOING_AWAY: 'going_away',
  /** No close frame (node killed, network lost), a failed open, or a dead socket found by ping. */
  NETWORK: 'network',
  /** 1008: 20 frames in a row refused as rate_limited: slow down. */
  POLICY: 'policy',
  /** 1009: a frame over 64 KiB. */
  TOO_BIG: 'too_big',
  /** 1011: an internal error on this connection. */
  INTERNAL: 'internal',
  /** 1012: the node is draining; another node takes the client at once. */
  DRAINING: 'draining',
  /** 1013: the client read too slowly, or had too many connections: try later. */
  TRY_LATER: 'try_later',
  /** 4000: the guest session ended (signed out, or the name lapsed and was taken): sign in again. */
  SESSION_ENDED: 'session_ended',
  /** 4001: kicked by an admin; the user may reconnect. */
  KICKED: 'kicked',
  /** 4003: banned by an admin: do not reconnect. */
  BANNED: 'banned',
  /** close() was called. */
  CLIENT: 'client',
  /** A code this SDK does not know. */
  UNKNOWN: 'unknown',
});

/**
 * @typedef {'now' | 'backoff' | 'later' | 'never' | 'ask'} ReconnectPolicy
 * now: at once (attempts start over); backoff: after the usual backoff;
 * later: after the backoff, and not sooner than a floor; never: stop;
 * ask: stop unless the client was told to come back (kicked).
 */

/** @type {Record<number, [string, ReconnectPolicy]>} */
const TABLE = {
  1000: [CloseReasons.NORMAL, 'backoff'],
  1001: [CloseReasons.GOING_AWAY, 'backoff'],
  1006: [CloseReasons.NETWORK, 'backoff'],
  1008: [CloseReasons.POLICY, 'later'],
  1009: [CloseReasons.TOO_BIG, 'backoff'],
  1011: [CloseReasons.INTERNAL, 'backoff'],
  1012: [CloseReasons.DRAINING, 'now'],
  1013: [CloseReasons.TRY_LATER, 'later'],
  4000: [CloseReasons.SESSION_ENDED, 'never'],
  4001: [CloseReasons.KICKED, 'ask'],
  4003: [CloseReasons.BANNED, 'never'],
};

/**
 * closeReasonOf names a close code and says what a client does next.
 * @param {number} code
 * @returns {{reason: string, policy: ReconnectPolicy}}
 */
export function closeReasonOf(code) {
  const t = TABLE[code];
  if (t) return {reason: t[0], policy: t[1]};
  // A code added to the contract later: coming back is safe, since a
  // server that wants a client out refuses its open (see probe).
  return {reason: CloseReasons.UNKNOWN, policy: 'backoff'};
}
