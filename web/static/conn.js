// Connection is one logical WebSocket to chatd that survives the loss of
// any physical one: it reconnects with exponential backoff and full jitter,
// checks liveness with application pings, and reports every step. What to
// do on a new socket (resume the rooms) is the caller's business: onOpen.
//
// On a network that breaks WebSocket upgrades (a WebSocket that closes
// before the server's hello), it falls back for good to the event stream
// (GET /api/v1/events, EventSource): events come in on the stream, and the
// frames the page sends go over plain HTTP (docs/PROTOCOL.md, Event
// stream), with the answers a WebSocket would give (ack, error) made from
// the HTTP answers. The caller sees the same frames either way.

import {api} from './api.js';

const BASE_DELAY = 500; // ms before the first retry (times 0.5..1 jitter)
const MAX_DELAY = 15000; // backoff cap
const CONNECT_TIMEOUT = 10000; // a handshake that takes longer is abandoned
const PING_EVERY = 20000; // application ping period (the server pings too, but a page cannot see those)
const PONG_TIMEOUT = 10000; // no pong by then: the socket is dead, reconnect
const STABLE_AFTER = 5000; // a socket open this long resets the backoff

export class Connection {
  /**
   * @param {object} o
   * @param {() => string} o.url the WebSocket URL, asked again on every attempt
   * @param {(gen: number) => void} o.onOpen a socket opened; gen counts sockets
   * @param {(frame: object) => void} o.onFrame a frame arrived
   * @param {(s: {state: string, attempt: number, delay?: number, opened?: boolean, code?: number}) => void} o.onState
   * @param {(code: number, reason: string) => boolean} [o.onClose] the server
   *   closed the socket; return false to stop (no reconnect)
   * @param {(ms: number) => void} [o.onLatency] a pong came back after ms
   * @param {() => string} [o.streamUrl] the event stream's URL (with the
   *   token): without it there is no fallback
   * @param {() => string} [o.token] the session token, for the HTTP sends
   *   of the fallback
   */
  constructor({url, onOpen, onFrame, onState, onClose, onLatency, streamUrl, token}) {
    this.url = url;
    this.streamUrl = streamUrl;
    this.token = token || (() => '');
    this.transport = 'WebSocket'; // or 'EventSource', once upgrades failed
    this.es = null; // the EventSource, in the fallback
    this.lastEventId = ''; // the stream's position, to resume with
    this.sends = new Set(); // HTTP sends in flight, in the fallback
    this.keyPrefix = Math.random().toString(36).slice(2, 10); // Idempotency-Keys of this page
    this.helloed = false; // the current WebSocket said hello
    this.refused = 0; // WebSockets in a row that died before hello while plain HTTP worked
    this.onOpen = onOpen;
    this.onFrame = onFrame;
    this.onState = (x) => onState({transport: this.transport, ...x});
    this.onClose = onClose || (() => true);
    this.onLatency = onLatency || (() => {});
    this.rtt = 0; // the latest ping's round trip, ms
    this.ws = null;
    this.gen = 0;
    this.attempt = 0;
    this.stopped = true;
    this.retryTimer = 0;
    this.pingTimer = 0;
    this.pongs = []; // FIFO of {cb, timer}: pongs answer pings in order
    this.openedAt = 0;
    this.wake = () => {
      if (!this.stopped && !this.ws && !this.es && document.visibilityState === 'visible') this.connectNow();
    };
  }

  /** start connects and keeps connecting until stop. */
  start() {
    if (!this.stopped) return;
    this.stopped = false;
    window.addEventListener('online', this.wake);
    document.addEventListener('visibilitychange', this.wake);
    this.connect();
  }

  /** stop closes the socket for good. */
  stop() {
    this.stopped = true;
    window.removeEventListener('online', this.wake);
    document.removeEventListener('visibilitychange', this.wake);
    clearTimeout(this.retryTimer);
    this.teardown(1000, 'bye');
    this.onState({state: 'closed', attempt: this.attempt});
  }

  /** open says whether frames can be sent now. */
  get open() {
    if (this.es) return this.es.readyState === EventSource.OPEN;
    return !!this.ws && this.ws.readyState === WebSocket.OPEN;
  }

  /** send sends one frame; false when there is no open socket. */
  send(frame) {
    if (!this.open) return false;
    if (this.es) this.sendHTTP(frame);
    else this.ws.send(JSON.stringify(frame));
    return true;
  }

  /**
   * ping sends a ping and calls cb on its pong. The server handles a
   * connection's frames in order, so the pong also says that every frame
   * sent before the ping has been handled and answered.
   */
  ping(cb) {
    if (!this.open) return false;
    if (this.es) {
      // No pings on a stream: the "pong" comes once every send made before
      // it has been answered.
      const es = this.es;
      const at = performance.now();
      Promise.allSettled([...this.sends]).then(() => {
        if (this.es !== es) return;
        this.rtt = Math.round(performance.now() - at);
        cb();
      });
      return true;
    }
    const ws = this.ws;
    const timer = setTimeout(() => {
      if (this.ws === ws) this.drop('no pong');
    }, PONG_TIMEOUT);
    this.pongs.push({cb, timer, at: performance.now()});
    this.send({type: 'ping'});
    return true;
  }

  /** connectNow skips the current backoff wait. */
  connectNow() {
    clearTimeout(this.retryTimer);
    if (!this.ws && !this.es) this.connect();
  }

  /** drop closes the current socket as broken; a new one follows. */
  drop(reason) {
    if (!this.ws) return;
    const ws = this.ws;
    this.teardown(4000, reason);
    this.closed(ws, {code: 4000, dropped: true}, this.openedAt > 0);
  }

  connect() {
    if (this.stopped) return;
    if (this.transport === 'EventSource') {
      this.connectStream();
      return;
    }
    this.helloed = false;
    let ws;
    try {
      ws = new WebSocket(this.url());
    } catch {
      this.retry(false, 0);
      return;
    }
    this.ws = ws;
    this.openedAt = 0;
    this.onState({state: 'connecting', attempt: this.attempt});
    const timeout = setTimeout(() => {
      if (this.ws === ws && ws.readyState !== WebSocket.OPEN) this.drop('connect timeout');
    }, CONNECT_TIMEOUT);
    ws.onopen = () => {
      clearTimeout(timeout);
      if (this.ws !== ws) return;
      this.gen++;
      this.openedAt = Date.now();
      this.onState({state: 'open', attempt: this.attempt});
      this.pingTimer = setInterval(() => this.ping(() => {}), PING_EVERY);
      this.onOpen(this.gen);
    };
    ws.onmessage = (ev) => {
      if (this.ws !== ws || typeof ev.data !== 'string') return;
      // Opened with batch=1: a text frame holds one or more events, one
      // JSON object per line.
      for (const line of ev.data.split('\n')) {
        if (line.trim() === '') continue;
        let f;
        try {
          f = JSON.parse(line);
        } catch {
          continue;
        }
        if (!f || typeof f.type !== 'string') continue;
        if (f.type === 'hello') this.helloed = true;
        if (f.type === 'pong') this.pong();
        else this.onFrame(f);
        if (this.ws !== ws) return; // a frame handler stopped or dropped us
      }
    };
    ws.onclose = (ev) => {
      clearTimeout(timeout);
      if (this.ws !== ws) return;
      const opened = this.openedAt > 0;
      this.teardown();
      if (ev.code >= 4000 || ev.code === 1008) {
        // A close the server decided (signed out, kicked, banned, policy):
        // the owner says whether to come back.
        if (!this.onClose(ev.code, ev.reason || '')) {
          this.stopped = true;
          this.onState({state: 'closed', attempt: this.attempt, code: ev.code});
          return;
        }
      }
      if (ev.code === 1012) {
        // The node is draining: another one takes us at once.
        this.attempt = 0;
      }
      this.closed(ws, ev, opened);
    };
    ws.onerror = () => {}; // onclose follows and does the work
  }

  pong() {
    const p = this.pongs.shift();
    if (!p) return;
    clearTimeout(p.timer);
    this.rtt = Math.round(performance.now() - p.at);
    this.onLatency(this.rtt);
    p.cb();
  }

  closed(ws, ev, opened) {
    if (this.stopped) return;
    if (ws && this.helloed) this.refused = 0;
    const broken = ev.dropped || ev.code === 1006 || ev.code === 1005 || ev.code === 1002;
    if (ws && !this.helloed && broken && this.streamUrl && this.transport === 'WebSocket') {
      // The WebSocket never got as far as the server's hello. If plain
      // HTTP works meanwhile, something on the way breaks upgrades; twice
      // in a row (not a network blip), the event stream takes over.
      const attempt = this.attempt;
      this.retry(opened, ev.code);
      fetch('/healthz', {cache: 'no-store'}).then((r) => {
        if (!r.ok || this.stopped || this.ws || this.attempt !== attempt + 1) return;
        if (++this.refused < 2) return;
        clearTimeout(this.retryTimer);
        this.transport = 'EventSource';
        this.attempt = 0;
        this.connect();
      }, () => {});
      return;
    }
    if (opened && Date.now() - this.openedAt >= STABLE_AFTER) this.attempt = 0;
    this.retry(opened, ev.code);
  }

  // connectStream opens the event stream, from the last position it had:
  // every room resumes after the last message seen, no gap, no duplicate.
  // The browser's own reconnect is not used (the stream is closed on an
  // error): the backoff and the position stay ours.
  connectStream() {
    let url = this.streamUrl();
    if (this.lastEventId) url += `${url.includes('?') ? '&' : '?'}last_event_id=${encodeURIComponent(this.lastEventId)}`;
    const es = new EventSource(url);
    this.es = es;
    this.openedAt = 0;
    this.onState({state: 'connecting', attempt: this.attempt});
    es.onopen = () => {
      if (this.es !== es) return;
      this.gen++;
      this.openedAt = Date.now();
      this.onState({state: 'open', attempt: this.attempt});
      this.onOpen(this.gen);
    };
    es.onmessage = (ev) => {
      if (this.es !== es) return;
      if (ev.lastEventId) this.lastEventId = ev.lastEventId;
      let f;
      try {
        f = JSON.parse(ev.data);
      } catch {
        return;
      }
      if (f && typeof f.type === 'string') this.onFrame(f);
    };
    const ended = (ev) => {
      if (this.es !== es) return;
      let f = {};
      try {
        f = JSON.parse(ev.data);
      } catch {
        // keep the defaults
      }
      const opened = this.openedAt > 0;
      this.teardown();
      const code = Number(f.code) || 0;
      if (ev.type === 'close' && !this.onClose(code, f.reason || '')) {
        this.stopped = true;
        this.onState({state: 'closed', attempt: this.attempt, code});
        return;
      }
      if (code === 1012) this.attempt = 0; // the node drains: another takes us at once
      this.retryStream(opened, code);
    };
    es.addEventListener('reconnect', ended);
    es.addEventListener('close', ended);
    es.onerror = () => {
      if (this.es !== es) return;
      const opened = this.openedAt > 0;
      this.teardown();
      this.retryStream(opened, 0);
    };
  }

  retryStream(opened, code) {
    if (this.stopped) return;
    if (opened && Date.now() - this.openedAt >= STABLE_AFTER) this.attempt = 0;
    this.retry(opened, code);
  }

  // sendHTTP sends a frame of the page as the HTTP request that does the
  // same, and hands the page the frame a WebSocket would have answered.
  sendHTTP(frame) {
    const gen = this.gen;
    const emit = (f) => {
      if (this.gen === gen && this.es) this.onFrame(f);
    };
    const token = this.token();
    const room = typeof frame.room === 'string' ? frame.room : '';
    const enc = encodeURIComponent;
    const failed = (err) => emit({type: 'error', code: err.code || 'internal', message: err.message || 'request failed',
      ...(frame.ref ? {ref: frame.ref} : {}), ...(room ? {room} : {})});
    let p = null;
    switch (frame.type) {
      case 'say':
        p = api('POST', `/rooms/${enc(room)}/messages`, {token, body: {text: frame.text},
          headers: frame.ref ? {'Idempotency-Key': `${this.keyPrefix}-${frame.ref}`} : {}})
          .then((r) => emit({type: 'ack', ref: frame.ref, id: r.message.id, room}), failed);
        break;
      case 'join':
        // The stream enters the room (joined, then its latest messages)
        // once the session holds it.
        p = api('POST', `/lobbies/${enc(frame.lobby)}/join`, {token}).catch(failed);
        break;
      case 'resume':
        // The stream resumed the session's rooms from its position
        // already; a join of the room's lobby keeps (or takes back) the seat.
        p = api('POST', `/lobbies/${enc(room.replace(/-\d+$/, ''))}/join`, {token}).catch(failed);
        break;
      case 'leave':
        p = api('POST', `/rooms/${enc(room)}/leave`, {token}).catch(failed);
        break;
      case 'read':
        p = api('POST', `/rooms/${enc(room)}/read`, {token, body: {id: frame.id}}).catch(failed);
        break;
      default:
        return; // typing has no HTTP twin: it is not sent
    }
    this.sends.add(p);
    p.finally(() => this.sends.delete(p));
  }

  retry(opened, code) {
    const ceiling = Math.min(MAX_DELAY, BASE_DELAY * 2 ** this.attempt);
    const delay = Math.round(ceiling * (0.5 + Math.random() * 0.5));
    this.attempt++;
    this.onState({state: 'waiting', attempt: this.attempt, delay, opened, code});
    clearTimeout(this.retryTimer);
    this.retryTimer = setTimeout(() => this.connect(), delay);
  }

  teardown(code, reason) {
    if (this.es) {
      const es = this.es;
      this.es = null;
      es.onopen = es.onmessage = es.onerror = null;
      es.close();
    }
    const ws = this.ws;
    this.ws = null;
    clearInterval(this.pingTimer);
    for (const p of this.pongs) clearTimeout(p.timer);
    this.pongs = [];
    if (ws) {
      ws.onopen = ws.onmessage = ws.onclose = null;
      try {
        if (code) ws.close(code, reason);
        else ws.close();
      } catch {
        // already closed
      }
    }
  }
}
