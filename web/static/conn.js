// Connection is one logical WebSocket to chatd that survives the loss of
// any physical one: it reconnects with exponential backoff and full jitter,
// checks liveness with application pings, and reports every step. What to
// do on a new socket (resume the rooms) is the caller's business: onOpen.

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
   */
  constructor({url, onOpen, onFrame, onState, onClose, onLatency}) {
    this.url = url;
    this.onOpen = onOpen;
    this.onFrame = onFrame;
    this.onState = onState;
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
      if (!this.stopped && !this.ws && document.visibilityState === 'visible') this.connectNow();
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
    return !!this.ws && this.ws.readyState === WebSocket.OPEN;
  }

  /** send sends one frame; false when there is no open socket. */
  send(frame) {
    if (!this.open) return false;
    this.ws.send(JSON.stringify(frame));
    return true;
  }

  /**
   * ping sends a ping and calls cb on its pong. The server handles a
   * connection's frames in order, so the pong also says that every frame
   * sent before the ping has been handled and answered.
   */
  ping(cb) {
    if (!this.open) return false;
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
    if (!this.ws) this.connect();
  }

  /** drop closes the current socket as broken; a new one follows. */
  drop(reason) {
    if (!this.ws) return;
    const ws = this.ws;
    this.teardown(4000, reason);
    this.closed(ws, {code: 4000}, this.openedAt > 0);
  }

  connect() {
    if (this.stopped) return;
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
    if (opened && Date.now() - this.openedAt >= STABLE_AFTER) this.attempt = 0;
    this.retry(opened, ev.code);
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
