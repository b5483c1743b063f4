// ChatdClient: the HTTP API of PROTOCOL.md ("HTTP API") for one user
// session, and the poll loop of REST game clients ("Polling").

import {Http, seg} from './http.js';
import {newIdempotencyKey} from './ids.js';
import {ChatdError, ClientCodes} from './errors.js';
import {backoffDelay, sleep} from './backoff.js';
import {RealtimeClient} from './realtime.js';

/** @typedef {import('./types.js').Room} Room */
/** @typedef {import('./types.js').Message} Message */
/** @typedef {import('./types.js').Session} Session */
/** @typedef {import('./types.js').LobbySummary} LobbySummary */
/** @typedef {import('./types.js').Entry} Entry */
/** @typedef {import('./types.js').ScoreMode} ScoreMode */
/** @typedef {import('./types.js').Wallet} Wallet */
/** @typedef {import('./types.js').Item} Item */
/** @typedef {import('./types.js').Settings} Settings */
/** @typedef {import('./types.js').SettingDef} SettingDef */
/** @typedef {import('./types.js').Presence} Presence */
/** @typedef {import('./types.js').PollAnswer} PollAnswer */
/** @typedef {import('./http.js').RetryInfo} RetryInfo */
/** @typedef {import('./backoff.js').BackoffOptions} BackoffOptions */
/** @typedef {import('./realtime-types.js').RealtimeOptions} RealtimeOptions */

/**
 * @typedef {object} ClientOptions
 * @property {string} [baseUrl] the server's origin, e.g. `https://chat.example.com` (the API is under /api/v1)
 * @property {string[]} [baseUrls] several nodes to use in turn, instead of baseUrl: a request goes to the current
 *   one; one that finds it down (no answer, 502, 503, 504) moves to the next, and is sent there again if it is
 *   safe to repeat. realtime() gets the same list, as WebSocket URLs
 * @property {string} [token] a token to reuse (from an earlier signIn, or a login service under --auth jwt)
 * @property {string} [user] the user of that token, if known
 * @property {typeof fetch} [fetch] default globalThis.fetch
 * @property {number} [retries] retries of a retryable request (default 2)
 * @property {BackoffOptions} [backoff] delays between retries (default base 250 ms, max 5 s)
 * @property {number} [maxRetryAfter] s: a longer Retry-After is thrown instead of waited out (default 30)
 * @property {number} [timeout] ms per request (default 30000; a long poll adds its wait)
 * @property {(info: RetryInfo) => void} [onRetry] told before each retry of a request
 */

/**
 * @typedef {object} CallOptions
 * @property {AbortSignal} [signal] aborts the call: it rejects with a ChatdError of code `aborted`
 */

/**
 * @typedef {object} KeyedOptions
 * @property {AbortSignal} [signal]
 * @property {string} [idempotencyKey] the Idempotency-Key to send (default: a new one for this call, reused by its retries)
 */

/**
 * @typedef {object} PollLoopError
 * @property {ChatdError} error what failed
 * @property {number} attempt failures in a row, from 1
 * @property {number} delay ms until the next poll
 */

/**
 * @typedef {object} PollLoopOptions
 * @property {number} [wait] s a clean poll is parked by the server, 0–30 (default 25)
 * @property {AbortSignal} [signal] ends the loop: the iterator returns, it does not throw
 * @property {number} [interval] ms between polls when wait is 0 (default 1000)
 * @property {BackoffOptions} [backoff] after failures (default base 500 ms, max 30 s)
 * @property {(e: PollLoopError) => void} [onError] told of each retried failure
 */

/** ChatdClient is the HTTP API for one user session. */
export class ChatdClient {
  /** @param {ClientOptions} o */
  constructor(o) {
    /** @type {string | undefined} the session's token; set by signIn, cleared by signOut */
    this.token = o.token;
    /** @type {string | undefined} the session's user */
    this.user = o.user;
    /** @private */
    this.http = new Http({...o, token: () => this.token});
  }

  /** baseUrl is the base URL in use: the first of baseUrls until a request found it down. */
  get baseUrl() {
    return this.http.baseUrl;
  }

  /** baseUrls are the base URLs the client was made with, in the order they are tried. */
  get baseUrls() {
    return [...this.http.urls];
  }

  // ---- sessions ----

  /**
   * signIn signs in as the guest `user` (a name-only login; the name is
   * held while the guest is active). Pass `token`, a live token of the
   * guest that holds the name, to open a second session of that guest (a
   * second device) instead of getting `name_taken`. The client keeps the
   * new token.
   * @param {string} user 1–32 of [A-Za-z0-9_-]
   * @param {CallOptions & {token?: string}} [o]
   * @returns {Promise<Session>}
   */
  async signIn(user, o = {}) {
    /** @type {Session} */
    const s = await this.http.request('POST', '/session', {body: {user}, signal: o.signal, token: o.token ?? null});
    this.token = s.token;
    this.user = s.user;
    return s;
  }

  /**
   * useToken makes the client act as an existing session (a token kept
   * from an earlier signIn, or minted by a login service).
   * @param {string} token
   * @param {string} [user]
   */
  useToken(token, user) {
    this.token = token;
    this.user = user;
  }

  /**
   * signOut ends the session: the name is free at once, every token of the
   * guest is refused from now on and its WebSockets close with 4000.
   * @param {CallOptions} [o]
   * @returns {Promise<void>}
   */
  async signOut(o = {}) {
    await this.http.request('DELETE', '/session', {signal: o.signal, retry: true});
    this.token = undefined;
  }

  /**
   * request calls any operation of /api/v1 this client has no method for
   * (the admin endpoints, say) with the client's token, and returns the
   * decoded answer; a refusal throws a ChatdError with the server's code.
   * It is not retried unless `retry` says the call is safe to repeat.
   * @param {string} method
   * @param {string} path under /api/v1, starting with / (a query may follow)
   * @param {CallOptions & {body?: unknown, query?: Record<string, string | number | undefined>, idempotencyKey?: string, retry?: boolean}} [o]
   * @returns {Promise<any>}
   */
  request(method, path, o = {}) {
    return this.http.request(method, path, {body: o.body, query: o.query, signal: o.signal, idempotencyKey: o.idempotencyKey, retry: o.retry});
  }

  // ---- lobbies and rooms ----

  /**
   * lobbies lists lobbies, most users online first.
   * @param {CallOptions & {limit?: number}} [o] limit 1–500 (default 50)
   * @returns {Promise<LobbySummary[]>}
   */
  async lobbies(o = {}) {
    const r = await this.http.request('GET', '/lobbies', {query: {limit: o.limit}, signal: o.signal, retry: true});
    return r.lobbies;
  }

  /**
   * rooms lists a lobby's rooms by number (none for an unknown lobby).
   * @param {string} lobby
   * @param {CallOptions} [o]
   * @returns {Promise<Room[]>}
   */
  async rooms(lobby, o = {}) {
    const r = await this.http.request('GET', `/lobbies/${seg(lobby)}/rooms`, {signal: o.signal, retry: true});
    return r.rooms;
  }

  /**
   * room reads one room.
   * @param {string} room
   * @param {CallOptions} [o]
   * @returns {Promise<Room>}
   */
  async room(room, o = {}) {
    const r = await this.http.request('GET', `/rooms/${seg(room)}`, {signal: o.signal, retry: true});
    return r.room;
  }

  /**
   * join takes a seat in the lobby (the same room when seated there
   * already). Over REST, the session's `messages` poll section carries
   * the room's messages from now on.
   * @param {string} lobby
   * @param {CallOptions} [o]
   * @returns {Promise<Room>}
   */
  async join(lobby, o = {}) {
    const r = await this.http.request('POST', `/lobbies/${seg(lobby)}/join`, {signal: o.signal, retry: true});
    return r.room;
  }

  /**
   * rpc calls a method of the application's backend (the server's rpc
   * hook: POST /rpc/{method}) with data (any JSON value; undefined = none)
   * and resolves with the backend's data (null when none). Never retried:
   * a call may act. Rejects with hook_denied (the backend's reason),
   * hook_unavailable, not_found (no rpc hook), rate_limited, bad_name.
   * @param {string} method
   * @param {unknown} [data]
   * @param {CallOptions} [o]
   * @returns {Promise<unknown>}
   */
  async rpc(method, data, o = {}) {
    const r = await this.http.request('POST', `/rpc/${seg(method)}`, {body: data, signal: o.signal});
    return r.data ?? null;
  }

  /**
   * leave frees the seat, for every connection and session of the user.
   * @param {string} room
   * @param {CallOptions} [o]
   * @returns {Promise<void>}
   */
  async leave(room, o = {}) {
    await this.http.request('POST', `/rooms/${seg(room)}/leave`, {signal: o.signal, retry: true});
  }

  // ---- messages ----

  /**
   * postMessage sends a chat message to a room the user is seated in. It
   * carries an Idempotency-Key (a new one per call unless given) that its
   * retries reuse, so that a server which honours the header stores one
   * message however often the answer is lost.
   * @param {string} room
   * @param {string} text
   * @param {KeyedOptions} [o]
   * @returns {Promise<Message>}
   */
  async postMessage(room, text, o = {}) {
    const r = await this.http.request('POST', `/rooms/${seg(room)}/messages`, {
      body: {text}, signal: o.signal, idempotencyKey: o.idempotencyKey ?? newIdempotencyKey(), retry: true,
    });
    return r.message;
  }

  /**
   * history reads a room's messages, oldest first: the latest `limit`, or
   * the ones after the message id `after`. A gone `after` is a ChatdError
   * of code `resume_gap`.
   * @param {string} room
   * @param {CallOptions & {after?: string, limit?: number}} [o] limit 1–1000 (default 100)
   * @returns {Promise<Message[]>}
   */
  async history(room, o = {}) {
    const r = await this.http.request('GET', `/rooms/${seg(room)}/messages`, {
      query: {after: o.after, limit: o.limit}, signal: o.signal, retry: true,
    });
    return r.messages;
  }

  /**
   * unread counts, for each room the user is seated in, the messages after
   * the user's read mark (at most 1,000).
   * @param {CallOptions} [o]
   * @returns {Promise<Record<string, number>>}
   */
  async unread(o = {}) {
    const r = await this.http.request('GET', '/unread', {signal: o.signal, retry: true});
    return r.rooms;
  }

  /**
   * markRead sets the user's read mark of a room to the message id (it
   * never moves backwards).
   * @param {string} room
   * @param {string} id
   * @param {CallOptions} [o]
   * @returns {Promise<void>}
   */
  async markRead(room, id, o = {}) {
    await this.http.request('POST', `/rooms/${seg(room)}/read`, {body: {id}, signal: o.signal, retry: true});
  }

  // ---- direct messages and blocks ----

  /**
   * conversations lists the user's direct conversations, the most recently
   * active first, with unread counts and last messages.
   * @param {CallOptions & {limit?: number}} [o] limit 1–50 (default 20)
   * @returns {Promise<import('./types.js').Conversation[]>}
   */
  async conversations(o = {}) {
    const r = await this.http.request('GET', '/direct', {query: {limit: o.limit}, signal: o.signal, retry: true});
    return r.conversations;
  }

  /**
   * openDirect opens (or finds) the conversation with a user and resolves
   * with its id. A ChatdError of code `blocked` when either blocks the other.
   * @param {string} user
   * @param {CallOptions} [o]
   * @returns {Promise<string>}
   */
  async openDirect(user, o = {}) {
    const r = await this.http.request('POST', `/direct/${seg(user)}`, {signal: o.signal, retry: true});
    return r.conversation.id;
  }

  /**
   * sendDirect sends a direct message to a user (opening the conversation)
   * or in a conversation (by id), with an Idempotency-Key its retries reuse.
   * @param {string} to a user name or a conversation id
   * @param {string} text
   * @param {KeyedOptions} [o]
   * @returns {Promise<import('./types.js').DirectMessage>}
   */
  async sendDirect(to, text, o = {}) {
    const r = await this.http.request('POST', `/direct/${seg(to)}/messages`, {
      body: {text}, signal: o.signal, idempotencyKey: o.idempotencyKey ?? newIdempotencyKey(), retry: true,
    });
    return r.message;
  }

  /**
   * directHistory reads a conversation, oldest first: the latest `limit`,
   * or the ones after `after`.
   * @param {string} to a user name or a conversation id
   * @param {CallOptions & {after?: string, limit?: number}} [o]
   * @returns {Promise<import('./types.js').DirectPage>}
   */
  async directHistory(to, o = {}) {
    const r = await this.http.request('GET', `/direct/${seg(to)}/messages`, {
      query: {after: o.after, limit: o.limit}, signal: o.signal, retry: true,
    });
    return {messages: r.messages, gap: r.gap, more: r.more};
  }

  /**
   * markDirectRead marks a conversation read up to a message id and
   * resolves with the unread count after.
   * @param {string} to
   * @param {string} id
   * @param {CallOptions} [o]
   * @returns {Promise<number>}
   */
  async markDirectRead(to, id, o = {}) {
    const r = await this.http.request('POST', `/direct/${seg(to)}/read`, {body: {id}, signal: o.signal, retry: true});
    return r.unread;
  }

  /**
   * block blocks a user (by canonical name; it survives sign-out).
   * @param {string} user
   * @param {CallOptions} [o]
   * @returns {Promise<void>}
   */
  async block(user, o = {}) {
    await this.http.request('PUT', `/blocks/${seg(user)}`, {signal: o.signal, retry: true});
  }

  /**
   * unblock lifts a block.
   * @param {string} user
   * @param {CallOptions} [o]
   * @returns {Promise<void>}
   */
  async unblock(user, o = {}) {
    await this.http.request('DELETE', `/blocks/${seg(user)}`, {signal: o.signal, retry: true});
  }

  /**
   * blocks lists the canonical names the user blocks.
   * @param {CallOptions} [o]
   * @returns {Promise<string[]>}
   */
  async blocks(o = {}) {
    const r = await this.http.request('GET', '/blocks', {signal: o.signal, retry: true});
    return r.blocks;
  }

  // ---- leaderboards ----

  /**
   * leaderboardTop reads a board's best entries, best first.
   * @param {string} board a lobby-style name, optionally with `@daily` or `@weekly`
   * @param {CallOptions & {limit?: number}} [o] limit 1–1000 (default 100)
   * @returns {Promise<Entry[]>}
   */
  async leaderboardTop(board, o = {}) {
    const r = await this.http.request('GET', `/leaderboards/${seg(board)}/top`, {query: {limit: o.limit}, signal: o.signal, retry: true});
    return r.entries;
  }

  /**
   * leaderboardPlayer reads one player's entry (`unknown_player` when none).
   * @param {string} board
   * @param {string} player
   * @param {CallOptions} [o]
   * @returns {Promise<Entry>}
   */
  async leaderboardPlayer(board, player, o = {}) {
    const r = await this.http.request('GET', `/leaderboards/${seg(board)}/players/${seg(player)}`, {signal: o.signal, retry: true});
    return r.entry;
  }

  /**
   * leaderboardAround reads up to `radius` entries above and below a player.
   * @param {string} board
   * @param {string} player
   * @param {CallOptions & {radius?: number}} [o] radius 0–500 (default 10)
   * @returns {Promise<Entry[]>}
   */
  async leaderboardAround(board, player, o = {}) {
    const r = await this.http.request('GET', `/leaderboards/${seg(board)}/around/${seg(player)}`, {
      query: {radius: o.radius}, signal: o.signal, retry: true,
    });
    return r.entries;
  }

  /**
   * leaderboardRange reads the entries with scores from min to max
   * (inclusive, both optional), best first.
   * @param {string} board
   * @param {CallOptions & {min?: number, max?: number, limit?: number}} [o]
   * @returns {Promise<Entry[]>}
   */
  async leaderboardRange(board, o = {}) {
    const r = await this.http.request('GET', `/leaderboards/${seg(board)}/range`, {
      query: {min: o.min, max: o.max, limit: o.limit}, signal: o.signal, retry: true,
    });
    return r.entries;
  }

  /**
   * leaderboardRanks reads the entries of the players asked for, in that
   * order, from one snapshot; a player with no score has rank -1.
   * @param {string} board
   * @param {string[]} players at most 1,000
   * @param {CallOptions} [o]
   * @returns {Promise<Entry[]>}
   */
  async leaderboardRanks(board, players, o = {}) {
    const r = await this.http.request('POST', `/leaderboards/${seg(board)}/ranks`, {body: {players}, signal: o.signal, retry: true});
    return r.entries;
  }

  /**
   * postScore posts a player's score (mode `best` keeps the better one,
   * `incr` adds, `set` replaces) with an Idempotency-Key reused by retries.
   * @param {string} board
   * @param {string} player
   * @param {number} score magnitude ≤ 1e15, at most three decimals
   * @param {KeyedOptions & {mode?: ScoreMode}} [o]
   * @returns {Promise<Entry>}
   */
  async postScore(board, player, score, o = {}) {
    /** @type {{player: string, score: number, mode?: ScoreMode}} */
    const body = {player, score};
    if (o.mode) body.mode = o.mode;
    const r = await this.http.request('POST', `/leaderboards/${seg(board)}/scores`, {
      body, signal: o.signal, idempotencyKey: o.idempotencyKey ?? newIdempotencyKey(), retry: true,
    });
    return r.entry;
  }

  // ---- seen filter ----

  /**
   * markSeen marks items seen by the user (at most 1,000, each 1–256 bytes).
   * @param {string[]} items
   * @param {CallOptions} [o]
   * @returns {Promise<void>}
   */
  async markSeen(items, o = {}) {
    await this.http.request('POST', '/seen', {body: {items}, signal: o.signal, retry: true});
  }

  /**
   * filterSeen returns the items not seen yet, in the order given (a seen
   * item is never returned; an unseen one is held back at the configured
   * false-positive rate).
   * @param {string[]} items
   * @param {CallOptions} [o]
   * @returns {Promise<string[]>}
   */
  async filterSeen(items, o = {}) {
    const r = await this.http.request('POST', '/seen/filter', {body: {items}, signal: o.signal, retry: true});
    return r.unseen;
  }

  // ---- shop and wallet ----

  /**
   * shopItems lists the shop's items by name.
   * @param {CallOptions} [o]
   * @returns {Promise<Item[]>}
   */
  async shopItems(o = {}) {
    const r = await this.http.request('GET', '/shop/items', {signal: o.signal, retry: true});
    return r.items;
  }

  /**
   * buy buys qty of an item with an Idempotency-Key (new per call unless
   * given, reused by its retries): however often it is retried, it buys
   * once, and a retry gets the first answer.
   * @param {string} item
   * @param {KeyedOptions & {qty?: number}} [o] qty 1–10^6 (default 1)
   * @returns {Promise<Wallet>} the wallet after the purchase
   */
  async buy(item, o = {}) {
    /** @type {{item: string, qty?: number}} */
    const body = {item};
    if (o.qty !== undefined) body.qty = o.qty;
    return this.http.request('POST', '/shop/buy', {
      body, signal: o.signal, idempotencyKey: o.idempotencyKey ?? newIdempotencyKey(), retry: true,
    });
  }

  /**
   * wallet reads the user's balance and items.
   * @param {CallOptions} [o]
   * @returns {Promise<Wallet>}
   */
  async wallet(o = {}) {
    return this.http.request('GET', '/wallet', {signal: o.signal, retry: true});
  }

  // ---- settings, presence ----

  /**
   * settings reads every live setting (defaults included) and the version.
   * @param {CallOptions} [o]
   * @returns {Promise<Settings>}
   */
  async settings(o = {}) {
    return this.http.request('GET', '/settings', {signal: o.signal, retry: true});
  }

  /**
   * settingDefs reads the settings' definitions in registry order.
   * @param {CallOptions} [o]
   * @returns {Promise<SettingDef[]>}
   */
  async settingDefs(o = {}) {
    const r = await this.http.request('GET', '/settings/defs', {signal: o.signal, retry: true});
    return r.settings;
  }

  /**
   * presence reads whether a user is online, where, and in which rooms.
   * @param {string} user
   * @param {CallOptions} [o]
   * @returns {Promise<Presence>}
   */
  async presence(user, o = {}) {
    return this.http.request('GET', `/presence/${seg(user)}`, {signal: o.signal, retry: true});
  }

  // ---- polling ----

  /**
   * poll reads and clears the session's dirty sections once and returns
   * each one's fresh data; `wait` (s, 0–30) parks a clean poll until
   * something changes. Not retried: a poll clears what it answers.
   * @param {CallOptions & {wait?: number}} [o]
   * @returns {Promise<PollAnswer>}
   */
  async poll(o = {}) {
    const wait = o.wait ?? 0;
    return this.http.request('GET', '/poll', {
      query: {wait: wait || undefined}, signal: o.signal, timeout: this.http.timeout + wait * 1000,
    });
  }

  /**
   * pollLoop long-polls until the signal fires, yielding every answer
   * that has dirty sections. Network failures, 5xx and 429 are retried
   * with exponential backoff and full jitter (at least the Retry-After);
   * any other error (bad_token, banned …) ends the loop by throwing.
   * @param {PollLoopOptions} [o]
   * @returns {AsyncGenerator<PollAnswer, void, void>}
   */
  async *pollLoop(o = {}) {
    const wait = o.wait ?? 25;
    const backoff = o.backoff ?? {base: 500, max: 30000};
    let failures = 0;
    while (!o.signal?.aborted) {
      /** @type {PollAnswer} */
      let ans;
      try {
        ans = await this.poll({wait, signal: o.signal});
      } catch (err) {
        const e = /** @type {ChatdError} */ (err);
        if (e instanceof ChatdError && e.code === ClientCodes.ABORTED) return;
        if (!(e instanceof ChatdError) || !e.retryable) throw e;
        let delay = backoffDelay(failures, backoff);
        failures++;
        if (e.retryAfter !== undefined) delay = Math.max(delay, e.retryAfter * 1000);
        o.onError?.({error: e, attempt: failures, delay});
        try {
          await sleep(delay, o.signal);
        } catch {
          return;
        }
        continue;
      }
      failures = 0;
      if (ans.dirty.length > 0) yield ans;
      if (wait === 0) {
        try {
          await sleep(o.interval ?? 1000, o.signal);
        } catch {
          return;
        }
      }
    }
  }

  // ---- realtime ----

  /**
   * realtime makes a RealtimeClient for this session: the WebSocket at
   * this server's /ws (or `urls`), with this client's token, and the
   * session check a refused open needs (a browser cannot see why a
   * WebSocket open failed: signed out and banned are asked over HTTP).
   * @param {Partial<RealtimeOptions>} [o]
   * @returns {RealtimeClient}
   */
  realtime(o = {}) {
    const ws = this.http.urls.map((u) => u.replace(/^http/, 'ws') + '/ws');
    return new RealtimeClient({
      url: ws.length === 1 ? ws[0] : ws,
      token: () => this.token ?? '',
      probe: async () => {
        await this.settings();
      },
      ...o,
    });
  }
}
