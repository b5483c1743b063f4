// The page's live connection is the SDK's RealtimeClient (chatd serves the
// SDK's modules at /sdk/): one logical connection that reconnects with
// backoff and full jitter, resumes the room from the last message shown
// (no gap, no duplicate), re-sends a say whose ack was lost with its own
// ref, pings to find half-open sockets, and stops where the close code
// says to (signed out, kicked, banned). This file only says how the page
// reaches the server and when to skip a backoff wait.
//
// The page opens a WebSocket; where the network refuses the upgrade (the
// first open fails, or closes before the server's hello), the client
// falls back to the Server-Sent Events stream (GET /api/v1/events) with
// its sends over HTTP, and stays on it until the page reloads. Once a
// WebSocket has worked, a failed open is an outage: it is retried as a
// WebSocket.

import {ChatdClient, RealtimeClient, sseTransport} from '/sdk/index.js';

/**
 * connect builds the page's realtime client for a session; the caller adds
 * its listeners, then calls connect() on it. Coming back online or to the
 * tab skips the current backoff wait.
 * @param {string} token the session's token
 * @returns {RealtimeClient}
 */
export function realtime(token) {
  const api = new ChatdClient({baseUrl: location.origin, token});
  const rt = new RealtimeClient({
    url: `${location.protocol === 'https:' ? 'wss:' : 'ws:'}//${location.host}/ws`,
    token,
    batch: true,
    fallback: sseTransport({baseUrl: location.origin}),
    // A browser cannot see why an open was refused: ask over HTTP now and
    // then (an ended session or a ban stops the client).
    probe: () => api.settings(),
  });
  const wake = () => {
    if (document.visibilityState === 'visible') rt.reconnectNow();
  };
  window.addEventListener('online', wake);
  document.addEventListener('visibilitychange', wake);
  rt.addEventListener('closed', () => {
    window.removeEventListener('online', wake);
    document.removeEventListener('visibilitychange', wake);
  });
  return rt;
}

/** transportName is how the status line names the client's transport. */
export function transportName(kind) {
  return kind === 'sse' ? 'SSE' : kind === 'websocket' ? 'WebSocket' : kind;
}

/**
 * pageRefs makes the refs of the page's says: unique per session across
 * tabs and reloads (the server answers a ref it stored already with the
 * original message, so a ref must never name two messages).
 * @returns {() => string}
 */
export function pageRefs() {
  const b = new Uint8Array(6);
  crypto.getRandomValues(b);
  const prefix = `p${[...b].map((x) => x.toString(16).padStart(2, '0')).join('')}-`;
  let n = 0;
  return () => `${prefix}${++n}`;
}
