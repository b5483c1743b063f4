// Errors: every failure the SDK reports is a ChatdError carrying the
// documented code (PROTOCOL.md, "Errors") or one of the SDK's own codes
// for what happens before or instead of a server answer.

/**
 * The error codes of the server (PROTOCOL.md, "Errors"; the ErrorCode enum
 * of openapi.json and ws-frames.schema.json).
 */
export const ErrorCodes = Object.freeze({
  BAD_JSON: 'bad_json',
  BAD_REQUEST: 'bad_request',
  BAD_NAME: 'bad_name',
  BAD_VALUE: 'bad_value',
  UNKNOWN_SETTING: 'unknown_setting',
  TOO_LONG: 'too_long',
  UNKNOWN_TYPE: 'unknown_type',
  BAD_TOKEN: 'bad_token',
  FORBIDDEN: 'forbidden',
  NOT_SEATED: 'not_seated',
  MUTED: 'muted',
  BANNED: 'banned',
  NOT_FOUND: 'not_found',
  UNKNOWN_ROOM: 'unknown_room',
  UNKNOWN_PLAYER: 'unknown_player',
  UNKNOWN_ITEM: 'unknown_item',
  UNKNOWN_MESSAGE: 'unknown_message',
  UNKNOWN_QUEUE: 'unknown_queue',
  UNKNOWN_TICKET: 'unknown_ticket',
  METHOD_NOT_ALLOWED: 'method_not_allowed',
  TIMEOUT: 'timeout',
  NAME_TAKEN: 'name_taken',
  ROOM_FULL: 'room_full',
  SEATED_ELSEWHERE: 'seated_elsewhere',
  RESUME_GAP: 'resume_gap',
  SOLD_OUT: 'sold_out',
  INSUFFICIENT_FUNDS: 'insufficient_funds',
  CONFLICT: 'conflict',
  BOARD_FULL: 'board_full',
  TICKET_OPEN: 'ticket_open',
  CONSENT_REQUIRED: 'consent_required',
  TOO_LARGE: 'too_large',
  RATE_LIMITED: 'rate_limited',
  TOO_MANY_CONNECTIONS: 'too_many_connections',
  INTERNAL: 'internal',
  BUSY: 'busy',
  REDIS_UNAVAILABLE: 'redis_unavailable',
  REDIS_OOM: 'redis_oom',
  REDIS_BUSY: 'redis_busy',
  DRAINING: 'draining',
  NOT_DURABLE: 'not_durable',
  NOT_PRIVATE: 'not_private',
  HOOK_DENIED: 'hook_denied',
  HOOK_UNAVAILABLE: 'hook_unavailable',
  BLOCKED: 'blocked',
});

/**
 * Codes the SDK itself gives to failures that carry no server code.
 * Their `status` is 0 unless an HTTP answer came with them.
 */
export const ClientCodes = Object.freeze({
  /** The server could not be reached, or the connection broke before an answer. */
  NETWORK: 'network',
  /** The call's AbortSignal fired; `cause` holds the signal's reason. */
  ABORTED: 'aborted',
  /** An answer that is not the documented JSON (a proxy's HTML page, say). */
  BAD_RESPONSE: 'bad_response',
  /** The realtime client closed for good (close(), signed out, banned, kicked) before the frame was answered. */
  CLOSED: 'closed',
  /** A frame the SDK refused to send: over the server's 64 KiB frame limit. */
  FRAME_TOO_LARGE: 'frame_too_large',
});

/**
 * @typedef {object} ChatdErrorInit
 * @property {string} code the documented code, or one of ClientCodes
 * @property {string} message a sentence a person can act on
 * @property {number} [status] the HTTP status (0 over the WebSocket or without an answer)
 * @property {number} [retryAfter] seconds to wait before retrying, when the server said
 * @property {string} [ref] the frame's ref (WebSocket errors)
 * @property {string} [room] the room the error concerns (WebSocket errors)
 * @property {unknown} [cause] the underlying error
 */

/** ChatdError is every error the SDK throws or rejects with. */
export class ChatdError extends Error {
  /** @param {ChatdErrorInit} init */
  constructor(init) {
    super(init.message, init.cause === undefined ? undefined : {cause: init.cause});
    this.name = 'ChatdError';
    /** @type {string} the documented code (ErrorCodes) or an SDK code (ClientCodes) */
    this.code = init.code;
    /** @type {number} HTTP status; 0 for WebSocket errors and failures without an answer */
    this.status = init.status || 0;
    /** @type {number | undefined} seconds the server asked to wait (Retry-After, or a rate_limited frame's "wait N s") */
    this.retryAfter = init.retryAfter;
    /** @type {string | undefined} */
    this.ref = init.ref;
    /** @type {string | undefined} */
    this.room = init.room;
  }

  /**
   * retryable says whether the same request may succeed later without a
   * change: network failures, 5xx, 429 and `conflict`.
   */
  get retryable() {
    return this.code === ClientCodes.NETWORK || this.status >= 500 || this.status === 429 ||
      this.code === ErrorCodes.CONFLICT || this.code === ErrorCodes.RATE_LIMITED ||
      this.code === ErrorCodes.BUSY || this.code === ErrorCodes.REDIS_UNAVAILABLE;
  }
}

/**
 * retryAfterSeconds reads a Retry-After header: delta seconds or an HTTP
 * date. Anything else is undefined.
 * @param {string | null | undefined} value
 * @param {number} [now] ms since the epoch
 * @returns {number | undefined}
 */
export function retryAfterSeconds(value, now = Date.now()) {
  if (value == null || value.trim() === '') return undefined;
  const v = value.trim();
  if (/^\d+(\.\d+)?$/.test(v)) return Number(v);
  const at = Date.parse(v);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, (at - now) / 1000);
}

/**
 * waitFromMessage reads the wait out of a rate_limited frame's message
 * ("…; wait 1.5 s"): the WebSocket has no header for it.
 * @param {string} message
 * @returns {number | undefined}
 */
export function waitFromMessage(message) {
  const m = /wait (\d+(?:\.\d+)?) ?s\b/.exec(message || '');
  return m ? Number(m[1]) : undefined;
}

/**
 * abortError is the ChatdError for a fired signal.
 * @param {AbortSignal} signal
 * @returns {ChatdError}
 */
export function abortError(signal) {
  return new ChatdError({code: ClientCodes.ABORTED, message: 'the call was aborted', cause: signal.reason});
}
