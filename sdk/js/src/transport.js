// The transport: how the realtime client reaches the server. The client
// needs only this small interface — open with a URL and token, send one
// JSON object, receive parsed events, learn the close code — so that
// another transport (an SSE stream with POSTed frames, say) can take the
// WebSocket's place without the client changing.

import {CloseCodes} from './close.js';

/**
 * A server event as received: one JSON object with a string `type`
 * (ws-frames.schema.json, ServerEvent). Unknown types and fields pass
 * through for the client to ignore.
 * @typedef {{type: string, [field: string]: any}} ServerEvent
 */

/**
 * What a transport tells its owner. `open` comes at most once, `close`
 * exactly once (also when the open failed), and neither after the owner
 * called Transport.close.
 * @typedef {object} TransportHandlers
 * @property {() => void} open the connection is up
 * @property {(event: ServerEvent) => void} event one event, in order
 * @property {(info: {code: number, reason: string}) => void} close the connection ended; code 1006 when no close code came
 */

/**
 * One connection.
 * @typedef {object} Transport
 * @property {(frame: Record<string, unknown>) => boolean} send sends one JSON object as one frame; false when not open
 * @property {(code?: number, reason?: string) => void} close ends the connection; no handler is called after it
 */

/**
 * What a factory is given for one connection: `rooms` are the rooms the
 * client is in, each with the last message it delivered there (a
 * transport that resumes at the open, as the SSE stream does, uses them;
 * the WebSocket resumes with `resume` frames instead).
 * @typedef {object} TransportOpen
 * @property {string} url
 * @property {string} token
 * @property {TransportHandlers} handlers
 * @property {{room: string, after?: string}[]} [rooms]
 */

/**
 * Opens one connection to url as the token's session. `kind` names the
 * transport (`'websocket'`, `'sse'`): RealtimeClient.transport says it.
 * @typedef {((o: TransportOpen) => Transport) & {kind?: string}} TransportFactory
 */

/**
 * The part of the WebSocket API the transport uses: the browser's, Node's
 * (Node 22+, or 20 with --experimental-websocket), undici's or the `ws`
 * package's.
 * @typedef {new (url: string) => WebSocket} WebSocketConstructor
 */

/**
 * @typedef {object} WebSocketTransportOptions
 * @property {WebSocketConstructor} [WebSocket] default globalThis.WebSocket
 * @property {boolean} [batch] open with ?batch=1 and split frames on '\n' (default true)
 */

/**
 * webSocketTransport is the TransportFactory of chatd's WebSocket:
 * `url?token=…&batch=1`, text frames of JSON, several events per frame
 * separated by '\n' when batched.
 * @param {WebSocketTransportOptions} [o]
 * @returns {TransportFactory}
 */
export function webSocketTransport(o = {}) {
  const WS = o.WebSocket ?? /** @type {WebSocketConstructor | undefined} */ (globalThis.WebSocket);
  const batch = o.batch ?? true;
  if (typeof WS !== 'function') {
    throw new TypeError('chatd: no WebSocket in this runtime: pass the WebSocket option ' +
      '(Node 20: run with --experimental-websocket, or pass the `ws` package\'s or undici\'s WebSocket)');
  }
  /** @type {TransportFactory} */
  const factory = ({url, token, handlers}) => {
    let done = false;
    /** @param {number} code @param {string} reason */
    const finish = (code, reason) => {
      if (done) return;
      done = true;
      handlers.close({code, reason});
    };
    const full = `${url}${url.includes('?') ? '&' : '?'}token=${encodeURIComponent(token)}${batch ? '&batch=1' : ''}`;
    /** @type {WebSocket} */
    let ws;
    try {
      ws = new WS(full);
    } catch (err) {
      queueMicrotask(() => finish(CloseCodes.ABNORMAL, String(err)));
      return {send: () => false, close: () => { done = true; }};
    }
    const decoder = new TextDecoder();
    let opened = false;
    ws.onopen = () => {
      opened = true;
      if (!done) handlers.open();
    };
    ws.onmessage = (ev) => {
      if (done) return;
      const data = typeof ev.data === 'string' ? ev.data : ArrayBuffer.isView(ev.data) ? decoder.decode(ev.data) : null;
      if (data === null) return; // the server sends text frames only
      for (const line of batch ? data.split('\n') : [data]) {
        if (line.trim() === '') continue;
        let f;
        try {
          f = JSON.parse(line);
        } catch {
          continue; // not one of the server's events: ignored as unknown
        }
        if (!f || typeof f !== 'object' || typeof f.type !== 'string') continue;
        handlers.event(f);
        if (done) return; // a handler closed us
      }
    };
    ws.onclose = (ev) => finish(ev.code || CloseCodes.ABNORMAL, ev.reason || '');
    // A close event should follow every error and say the code, but
    // Node 20's WebSocket (undici) fires only the error when the open is
    // refused (a non-101 answer): an error before the open is the end,
    // and after it a close that does not come within a second is taken
    // as given.
    ws.onerror = () => {
      if (!opened) finish(CloseCodes.ABNORMAL, 'the open failed');
      else setTimeout(() => finish(CloseCodes.ABNORMAL, 'connection error'), 1000);
    };
    return {
      send(frame) {
        if (done || ws.readyState !== 1) return false;
        ws.send(JSON.stringify(frame));
        return true;
      },
      close(code = 1000, reason = '') {
        done = true;
        ws.onopen = ws.onmessage = ws.onclose = ws.onerror = null;
        try {
          ws.close(code, reason);
        } catch {
          // closing already, or a code the runtime refuses: it goes anyway
        }
      },
    };
  };
  return Object.assign(factory, {kind: 'websocket'});
}
