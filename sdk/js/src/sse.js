// The Server-Sent Events transport: for networks that break WebSocket
// upgrades (PROTOCOL.md, GET /api/v1/events). The stream only receives —
// the same events as the WebSocket, one `data:` JSON object each — so the
// frames the realtime client sends go over plain HTTP on any node: a say
// is POST …/messages with the say's ref as its Idempotency-Key, join,
// leave and read marks are their REST calls. The stream follows the
// session's rooms by itself, and resumes all of them from one position
// (Last-Event-ID), built at each open from the last message the client
// delivered in each room (its start, 0-0, in a room it has received
// nothing of).
//
// It reads the stream with fetch (a streaming body), not EventSource:
// Node 20 has no EventSource, and EventSource cannot send the token in a
// header nor let the realtime client decide when and where to reconnect.

import {CloseCodes} from './close.js';
import {ClientCodes, ErrorCodes} from './errors.js';
import {Http, seg} from './http.js';

/** @typedef {import('./transport.js').TransportFactory} TransportFactory */
/** @typedef {import('./transport.js').ServerEvent} ServerEvent */
/** @typedef {import('./errors.js').ChatdError} ChatdError */

/**
 * @typedef {object} SSETransportOptions
 * @property {string} [baseUrl] the server's origin (the stream is `baseUrl/api/v1/events`, sends go to `baseUrl/api/v1`);
 *   default: the origin of the URL the realtime client opens (its WebSocket URL, ws → http)
 * @property {typeof fetch} [fetch] default globalThis.fetch
 */

/**
 * sseTransport is the TransportFactory of chatd's Server-Sent Events
 * stream. Frames map to HTTP calls, made one at a time in the order sent
 * (so a pong, answered once every call before it finished, still means
 * that they were all handled): `say` → POST /rooms/{room}/messages (an
 * `ack`, or an `error` with the frame's ref), `join` → POST
 * /lobbies/{lobby}/join (its `joined` comes on the stream), `leave`,
 * `read`; `resume` of a room the stream follows is done by the stream's
 * position at the open, and `resume` without `after` of any other room
 * (RealtimeClient.enter: a match's room) → POST /rooms/{room}/join (its
 * `joined` comes on the stream), `typing` → POST /rooms/{room}/typing.
 * A call that gets no answer drops
 * the connection, so that the client re-sends its unacknowledged says on
 * the next one (their Idempotency-Key stores each once). A refused open
 * ends with the close code the WebSocket would have had: 4000 for
 * `bad_token`, 4003 for `banned`, 1013 for 429 and 503.
 * @param {SSETransportOptions} [o]
 * @returns {TransportFactory}
 */
export function sseTransport(o = {}) {
  const f = o.fetch ?? globalThis.fetch;
  if (typeof f !== 'function') throw new TypeError('chatd: no fetch in this runtime: pass the fetch option');
  /** @type {TransportFactory} */
  const factory = ({url, token, handlers, rooms}) => {
    const base = (o.baseUrl ?? httpOrigin(url)).replace(/\/+$/, '');
    const http = new Http({baseUrl: base, token: () => token, fetch: f, retries: 0});
    const ac = new AbortController();
    let done = false;
    let opened = false;
    /** @param {number} code @param {string} reason */
    const finish = (code, reason) => {
      if (done) return;
      done = true;
      ac.abort();
      handlers.close({code, reason});
    };
    // The rooms the stream follows (the session's: those the client is in
    // at the open, then what the stream says), so that a resume without
    // `after` of any other room (RealtimeClient.enter) takes its seat over
    // HTTP.
    const followed = new Set((rooms ?? []).map((r) => r.room));
    // A room the client is in but has received nothing of yet resumes from
    // its start (as over WebSocket): left out, it would be entered as a
    // join (the latest 50), or, with no room named at all, the stream as a
    // new one, and what was sent while the client was away skipped.
    const position = (rooms ?? [])
      .map((r) => `${r.room}@${r.after || ROOM_START}`)
      .sort()
      .join(',');

    /** @param {string} text one event's data */
    const dispatch = (text) => {
      let e;
      try {
        e = JSON.parse(text);
      } catch {
        return; // not one of the server's events
      }
      if (!e || typeof e !== 'object' || typeof e.type !== 'string') return;
      if (e.type === 'reconnect' || e.type === 'close') {
        finish(Number(e.code) || CloseCodes.ABNORMAL, typeof e.reason === 'string' ? e.reason : '');
        return;
      }
      if (e.type === 'joined' && e.room && typeof e.room.id === 'string') followed.add(e.room.id);
      if (e.type === 'left' && typeof e.room === 'string') followed.delete(e.room);
      handlers.event(e);
    };

    const read = async () => {
      /** @type {Record<string, string>} */
      const headers = {Accept: 'text/event-stream', Authorization: `Bearer ${token}`};
      if (position) headers['Last-Event-ID'] = position;
      let res;
      try {
        res = await f(`${base}/api/v1/events`, {headers, signal: ac.signal, cache: 'no-store'});
      } catch {
        finish(CloseCodes.ABNORMAL, 'the stream could not be opened');
        return;
      }
      if (!res.ok || !res.body) {
        let code = '';
        let message = `HTTP ${res.status}`;
        try {
          const j = await res.json();
          if (j && j.error && typeof j.error.code === 'string') {
            code = j.error.code;
            message = String(j.error.message || code);
          }
        } catch {
          // not the error shape (a proxy's page): the status says enough
        }
        finish(refusalCode(res.status, code), message);
        return;
      }
      if (done) return;
      opened = true;
      handlers.open();
      const reader = res.body.getReader();
      const decoder = new TextDecoder();
      let buf = '';
      /** @type {string[]} */
      let data = [];
      try {
        for (;;) {
          const {value, done: end} = await reader.read();
          if (end || done) break;
          buf += decoder.decode(value, {stream: true});
          for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
            let line = buf.slice(0, i);
            buf = buf.slice(i + 1);
            if (line.endsWith('\r')) line = line.slice(0, -1);
            if (line === '') {
              if (data.length > 0) dispatch(data.join('\n'));
              data = [];
              if (done) return;
              continue;
            }
            if (line.startsWith(':')) continue; // a comment: the heartbeat
            const c = line.indexOf(':');
            const field = c < 0 ? line : line.slice(0, c);
            let v = c < 0 ? '' : line.slice(c + 1);
            if (v.startsWith(' ')) v = v.slice(1);
            // `id:` is the stream's position: the client's own per-room
            // last ids say it again at the next open. `event:` repeats the
            // data's type; `retry:` is for EventSource.
            if (field === 'data') data.push(v);
          }
        }
      } catch {
        // aborted, or the connection broke
      }
      finish(CloseCodes.ABNORMAL, 'the stream ended');
    };
    void read();

    // Sends, one at a time, in order.
    let chain = Promise.resolve();
    /** @param {() => Promise<void>} fn */
    const later = (fn) => {
      chain = chain.then(() => (done ? undefined : fn())).catch(() => {});
    };
    /**
     * call makes one HTTP call for frame; its failure becomes an error
     * event with the frame's ref, or, without an answer, the end of the
     * connection.
     * @param {Record<string, any>} frame
     * @param {string} method
     * @param {string} path
     * @param {{body?: unknown, idempotencyKey?: string}} req
     * @returns {Promise<any>}
     */
    const call = async (frame, method, path, req) => {
      try {
        return await http.request(method, path, {...req, signal: ac.signal});
      } catch (err) {
        const e = /** @type {ChatdError} */ (err);
        if (done) return undefined;
        if (e.code === ClientCodes.NETWORK || e.code === ClientCodes.ABORTED) {
          finish(CloseCodes.ABNORMAL, `${method} ${path}: no answer`);
          return undefined;
        }
        /** @type {ServerEvent} */
        const ev = {type: 'error', code: e.code, message: e.message};
        if (typeof frame.ref === 'string') ev.ref = frame.ref;
        if (typeof frame.room === 'string') ev.room = frame.room;
        if (e.code === ErrorCodes.RATE_LIMITED && e.retryAfter !== undefined && !/wait [\d.]+ ?s/.test(e.message)) {
          ev.message = `${e.message}; wait ${e.retryAfter} s`;
        }
        handlers.event(ev);
        return undefined;
      }
    };

    return {
      send(frame) {
        if (done || !opened) return false;
        const fr = /** @type {Record<string, any>} */ (frame);
        switch (fr.type) {
          case 'say':
            later(async () => {
              const r = await call(fr, 'POST', `/rooms/${seg(fr.room)}/messages`, {body: {text: fr.text}, idempotencyKey: fr.ref});
              if (r && r.message && !done) handlers.event({type: 'ack', id: r.message.id, room: fr.room, ref: fr.ref});
            });
            return true;
          case 'join':
            later(async () => {
              await call(fr, 'POST', `/lobbies/${seg(fr.lobby)}/join`, {});
            });
            return true;
          case 'leave':
            followed.delete(fr.room);
            later(async () => {
              await call(fr, 'POST', `/rooms/${seg(fr.room)}/leave`, {});
            });
            return true;
          case 'read':
            later(async () => {
              await call(fr, 'POST', `/rooms/${seg(fr.room)}/read`, {body: {id: fr.id}});
            });
            return true;
          case 'typing':
            later(async () => {
              await call(fr, 'POST', `/rooms/${seg(fr.room)}/typing`, {});
            });
            return true;
          case 'rpc':
            later(async () => {
              const r = await call(fr, 'POST', `/rpc/${seg(fr.method)}`, {body: fr.data});
              if (r && !done) handlers.event({type: 'rpc_result', ref: fr.ref, method: fr.method, data: r.data ?? null});
            });
            return true;
          case 'ping':
            later(async () => {
              if (!done) handlers.event({type: 'pong'});
            });
            return true;
          case 'resume':
            // A room the stream follows was resumed by the stream's
            // position at the open. Any other room, without `after`, is
            // entered by its id (a match's room): POST …/join seats the
            // session, and the stream, told of it, sends its `joined`.
            if (fr.after !== undefined || followed.has(fr.room)) return true;
            followed.add(fr.room);
            later(async () => {
              const r = await call(fr, 'POST', `/rooms/${seg(fr.room)}/join`, {});
              if (r === undefined) followed.delete(fr.room);
            });
            return true;
          default:
            return false; // no HTTP call for it
        }
      },
      close() {
        done = true;
        ac.abort();
      },
    };
  };
  return Object.assign(factory, {kind: 'sse'});
}

/** The position before a room's first message (as in realtime.js). */
const ROOM_START = '0-0';

/**
 * httpOrigin is the http(s) origin of a ws(s) or http(s) URL.
 * @param {string} url
 * @returns {string}
 */
function httpOrigin(url) {
  const u = new URL(url);
  const scheme = u.protocol === 'wss:' ? 'https:' : u.protocol === 'ws:' ? 'http:' : u.protocol;
  return `${scheme}//${u.host}`;
}

/**
 * refusalCode is the close code of a refused open.
 * @param {number} status
 * @param {string} code
 * @returns {number}
 */
function refusalCode(status, code) {
  if (code === ErrorCodes.BAD_TOKEN) return CloseCodes.SESSION_ENDED;
  if (code === ErrorCodes.BANNED) return CloseCodes.BANNED;
  if (status === 429 || status === 503) return CloseCodes.TRY_LATER;
  return CloseCodes.ABNORMAL;
}
