// RealtimeClient: one logical connection to chatd that survives the loss
// of any physical one (PROTOCOL.md, "WebSocket"). It reconnects with
// exponential backoff and full jitter (at once after a drain, 1012), to
// the next URL of its list, resumes every room from the last message it
// delivered (a `resume` frame with `after`), drops at the seam what it
// delivered already (by id), re-sends the says not acknowledged yet with
// their own `ref`, and stops where the close code says to (4000, 4003,
// 4001 unless told otherwise).

import {TypedEventTarget} from './events.js';
import {ChatdError, ClientCodes, ErrorCodes, waitFromMessage} from './errors.js';
import {CloseCodes, CloseReasons, closeReasonOf} from './close.js';
import {backoffDelay} from './backoff.js';
import {compareIds, randomHex} from './ids.js';
import {webSocketTransport} from './transport.js';

/** @typedef {import('./types.js').Room} Room */
/** @typedef {import('./types.js').Message} Message */
/** @typedef {import('./types.js').MatchEvent} MatchEvent */
/** @typedef {import('./transport.js').Transport} Transport */
/** @typedef {import('./transport.js').TransportFactory} TransportFactory */
/** @typedef {import('./transport.js').ServerEvent} ServerEvent */

/** @typedef {import('./realtime-types.js').RealtimeOptions} RealtimeOptions */
/** @typedef {import('./realtime-types.js').RealtimeEventMap} RealtimeEventMap */
/** @typedef {import('./realtime-types.js').Ack} Ack */
/** @typedef {import('./realtime-types.js').RoomState} RoomState */

const MAX_FRAME = 64 << 10;
/** The position before a room's first message: a resume after it replays the room from its oldest message. */
const ROOM_START = '0-0';
const encoder = new TextEncoder();

/**
 * @extends {TypedEventTarget<RealtimeEventMap>}
 */
export class RealtimeClient extends TypedEventTarget {
  /** @param {RealtimeOptions} o */
  constructor(o) {
    super();
    if (!o || !o.url) throw new TypeError('chatd: url is required, e.g. "wss://chat.example.com/ws"');
    /** @private */
    this.o = o;
    /** @private @type {TransportFactory} */
    this.factory = o.transport ?? webSocketTransport({WebSocket: o.WebSocket, batch: o.batch});
    /** @private */
    this.fellBack = false; // the fallback transport is in use
    /** @private */
    this.mainFails = 0; // opens of the main transport in a row that did not reach hello
    /** @private */
    this.mainUp = false; // the main transport reached hello since connect(): later failed opens are outages
    /**
     * the kind of the transport of the current (or latest) connection:
     * `'websocket'`, `'sse'` (after a fallback), or a custom factory's
     * `kind` (`'custom'` without one)
     * @type {string}
     */
    this.transport = this.factory.kind ?? 'custom';
    /** @type {'idle' | 'connecting' | 'open' | 'reconnecting' | 'closed'} */
    this.state = 'idle';
    /** the node, user and motd of the latest hello */
    this.hello = {user: '', node: '', motd: '', data: /** @type {unknown} */ (null)};
    /** counters: connections made, duplicates dropped at the seam, says re-sent after a reconnect */
    this.stats = {connections: 0, duplicates: 0, resent: 0};
    /** @private */
    this.refPrefix = `${randomHex(6)}-`; // refs are unique per session: never reuse one for another say
    /** @private */
    this.refs = 0;
    /** @private @type {Transport | null} */
    this.t = null;
    /** @private */
    this.ready = false; // hello received on t
    /** @private */
    this.gen = 0;
    /** @private */
    this.attempt = 0;
    /** @private */
    this.urlIndex = 0;
    /** @private */
    this.failedOpens = 0;
    /** @private */
    this.openedAt = 0;
    /** @private @type {ReturnType<typeof setTimeout> | undefined} */
    this.timer = undefined;
    /** @private @type {ReturnType<typeof setInterval> | undefined} */
    this.pinger = undefined;
    /** @private @type {Map<string, RoomState>} */
    this.roomMap = new Map();
    /** @private @type {Map<string, {lobby: string, resolve: (r: Room) => void, reject: (e: ChatdError) => void}>} */
    this.joins = new Map();
    /** @private @type {Map<string, {room: string, text: string, resolve: (a: Ack) => void, reject: (e: ChatdError) => void, sent: number}>} */
    this.says = new Map();
    /** @private @type {Map<string, {room: string, resolve: () => void, reject: (e: ChatdError) => void}>} */
    this.leaves = new Map();
    /** @private @type {Map<string, {room: string, after?: string, resolve: (r: Room) => void, reject: (e: ChatdError) => void}>} */
    this.enters = new Map();
    /** @private @type {Map<string, string>} resume ref → room, on the current connection */
    this.resumes = new Map();
    /** @private @type {Map<string, string>} room → read mark not sent yet */
    this.reads = new Map();
    /** @private @type {Map<string, string>} room → read mark sent */
    this.readSent = new Map();
    /** @private @type {Map<string, number>} room → when typing was last sent */
    this.typed = new Map();
    /** @private @type {{resolve: (ms: number) => void, reject: (e: ChatdError) => void, at: number, timer?: ReturnType<typeof setTimeout>}[]} */
    this.pongs = [];
    /** @private @type {Map<string, {resolve: (data: unknown) => void, reject: (e: ChatdError) => void}>} rpc calls sent on the current connection */
    this.rpcs = new Map();
    /** @private @type {{resolve: (h: RealtimeEventMap['open']) => void, reject: (e: ChatdError) => void}[]} */
    this.waiting = [];
  }

  // ---- lifecycle ----

  /**
   * connect starts the client (and starts it again after it closed for
   * good); it resolves with the next hello, or rejects if the client
   * closes for good first. Frames sent before are queued.
   * @returns {Promise<RealtimeEventMap['open']>}
   */
  connect() {
    const p = new Promise((resolve, reject) => {
      if (this.ready && this.state === 'open') resolve({...this.hello, reconnected: this.stats.connections > 1, transport: this.transport});
      else this.waiting.push({resolve, reject});
    });
    if (this.state === 'idle' || this.state === 'closed') {
      this.attempt = 0;
      this.failedOpens = 0;
      this.fellBack = false;
      this.mainFails = 0;
      this.mainUp = false;
      this.setState('connecting');
      void this.open();
    }
    return /** @type {Promise<RealtimeEventMap['open']>} */ (p);
  }

  /**
   * close stops the client for good: the connection closes with 1000,
   * pending says, joins and leaves reject with code `closed`, and the
   * rooms are forgotten (the seats lapse on the server unless left).
   */
  close() {
    const err = closedError('the client was closed');
    this.stop(CloseCodes.NORMAL, CloseReasons.CLIENT, '', false, err);
    this.roomMap.clear();
    this.reads.clear();
  }

  /** reconnectNow skips the current backoff wait. */
  reconnectNow() {
    if (this.state !== 'reconnecting' || this.t) return;
    clearTimeout(this.timer);
    void this.open();
  }

  /**
   * @private
   * @param {'connecting' | 'open' | 'reconnecting' | 'closed'} s
   */
  setState(s) {
    if (this.state === s) return;
    this.state = s;
    this.emit('state', {state: s, attempt: this.attempt});
  }

  /** @private */
  async open() {
    this.timer = undefined;
    const gen = ++this.gen;
    let url;
    let token;
    try {
      const u = this.o.url;
      url = typeof u === 'string' ? u : Array.isArray(u) ? u[this.urlIndex % u.length] : await u(this.attempt);
      token = typeof this.o.token === 'function' ? this.o.token() : this.o.token;
    } catch (err) {
      if (gen === this.gen) this.closed(gen, {code: CloseCodes.ABNORMAL, reason: String(err)});
      return;
    }
    if (gen !== this.gen || this.state === 'closed') return;
    const factory = this.fellBack && this.o.fallback ? this.o.fallback : this.factory;
    this.transport = factory.kind ?? 'custom';
    const t = factory({
      url,
      token,
      rooms: [...this.roomMap].map(([room, r]) => (r.lastId ? {room, after: r.lastId} : {room})),
      handlers: {
        open: () => {},
        event: (ev) => {
          if (gen === this.gen) this.onEvent(ev);
        },
        close: (info) => {
          if (gen === this.gen) this.closed(gen, info);
        },
      },
    });
    this.t = t;
    this.timer = setTimeout(() => {
      if (gen === this.gen && !this.ready) this.drop(gen, 'no hello in time');
    }, this.o.connectTimeout ?? 10000);
  }

  /**
   * drop closes the current connection as broken; a new one follows.
   * @param {number} gen
   * @param {string} why
   * @private
   */
  drop(gen, why) {
    this.t?.close(1000, why);
    this.closed(gen, {code: CloseCodes.ABNORMAL, reason: why});
  }

  /**
   * closed handles the end of connection gen: reconnect, or stop.
   * @param {number} gen
   * @param {{code: number, reason: string}} info
   * @private
   */
  closed(gen, info) {
    if (gen !== this.gen || this.state === 'closed') return;
    const wasReady = this.ready;
    this.teardown();
    let {reason, policy} = closeReasonOf(info.code);
    if (policy === 'ask') policy = this.o.reconnectOnKick ? 'backoff' : 'never';
    if (reason === CloseReasons.KICKED || reason === CloseReasons.BANNED) {
      this.emit('moderation', {action: reason === CloseReasons.KICKED ? 'kicked' : 'banned', text: info.reason});
    }
    if (policy === 'never') {
      const err = closedError(`the connection closed for good (${reason}${info.reason ? `: ${info.reason}` : ''})`);
      this.stop(info.code, reason, info.reason, reason === CloseReasons.KICKED, err);
      return;
    }
    if (wasReady && Date.now() - this.openedAt >= (this.o.stableAfter ?? 5000)) this.attempt = 0;
    if (!wasReady) {
      this.failedOpens++;
      // A network that breaks upgrades breaks them from the first open:
      // once the main transport has worked, a failed open is an outage.
      if (!this.fellBack && !this.mainUp && this.o.fallback && ++this.mainFails >= (this.o.fallbackAfter ?? 1)) this.fellBack = true;
    }
    this.urlIndex++;
    let delay = 0;
    if (policy === 'now') {
      this.attempt = 0;
    } else {
      delay = backoffDelay(this.attempt, this.o.backoff);
      if (policy === 'later') delay = Math.max(delay, reason === CloseReasons.POLICY ? this.o.policyDelay ?? 5000 : this.o.tryLaterDelay ?? 1000);
      this.attempt++;
    }
    this.setState('reconnecting');
    this.emit('disconnected', {code: info.code, reason, text: info.reason, willReconnect: true, delay, attempt: this.attempt});
    if (this.state !== 'reconnecting') return; // a listener closed the client
    this.timer = setTimeout(() => void this.open(), delay);
    if (!wasReady && this.o.probe && this.failedOpens % 3 === 1) void this.runProbe(this.gen);
  }

  /**
   * runProbe asks the server over HTTP why opens fail: an ended session
   * or a ban stops the client.
   * @param {number} gen
   * @private
   */
  async runProbe(gen) {
    try {
      await this.o.probe?.();
    } catch (err) {
      if (!(err instanceof ChatdError) || this.state === 'closed' || gen !== this.gen) return;
      const why = closedError(`the server refuses the connection: ${err.message}`, err);
      if (err.code === ErrorCodes.BAD_TOKEN) {
        this.stop(CloseCodes.SESSION_ENDED, CloseReasons.SESSION_ENDED, err.message, false, why);
      } else if (err.code === ErrorCodes.BANNED) {
        this.stop(CloseCodes.BANNED, CloseReasons.BANNED, err.message, false, why);
      }
    }
  }

  /**
   * stop ends the client for good.
   * @param {number} code
   * @param {string} reason
   * @param {string} text
   * @param {boolean} mayReconnect
   * @param {ChatdError} err what pending calls reject with
   * @private
   */
  stop(code, reason, text, mayReconnect, err) {
    if (this.state === 'closed') return;
    const open = this.t !== null;
    this.gen++;
    clearTimeout(this.timer);
    this.t?.close(1000, 'bye');
    this.teardown();
    this.setState('closed');
    for (const m of [this.says, this.joins, this.leaves, this.enters]) {
      for (const p of m.values()) p.reject(err);
      m.clear();
    }
    for (const w of this.waiting.splice(0)) w.reject(err);
    if (open || reason !== CloseReasons.CLIENT) {
      this.emit('disconnected', {code, reason, text, willReconnect: false, attempt: this.attempt});
    }
    this.emit('closed', {code, reason, text, mayReconnect});
  }

  /** @private */
  teardown() {
    this.t = null;
    this.ready = false;
    clearTimeout(this.timer);
    clearInterval(this.pinger);
    this.resumes.clear();
    const lost = new ChatdError({code: ClientCodes.NETWORK, message: 'the connection was lost before the pong'});
    for (const p of this.pongs.splice(0)) {
      clearTimeout(p.timer);
      p.reject(lost);
    }
    // An rpc is never sent twice: the backend may have run it.
    const rpcLost = new ChatdError({code: ClientCodes.NETWORK, message: 'the connection was lost before the rpc answer; the call may or may not have run'});
    for (const r of this.rpcs.values()) r.reject(rpcLost);
    this.rpcs.clear();
  }

  // ---- events ----

  /**
   * @private
   * @param {ServerEvent} ev
   */
  onEvent(ev) {
    switch (ev.type) {
      case 'hello': return this.onHello(ev);
      case 'joined': return this.onJoined(ev.room);
      case 'message': return this.onMessage(ev.message);
      case 'ack': return this.onAck(ev);
      case 'error': return this.onError(ev);
      case 'pong': return this.onPong();
      case 'rpc_result': {
        const r = this.rpcs.get(typeof ev.ref === 'string' ? ev.ref : '');
        if (r) {
          this.rpcs.delete(/** @type {string} */ (ev.ref));
          r.resolve(ev.data ?? null);
        }
        return undefined;
      }
      case 'left': return this.onLeft(ev.room);
      case 'presence':
        return this.emit('presence', {room: ev.room, user: ev.user, state: ev.state});
      case 'typing':
        return this.emit('typing', {room: ev.room, user: ev.user});
      case 'settings':
        return this.emit('settings', {key: ev.key, value: ev.value, version: ev.version});
      case 'notice':
        return this.emit('notice', {id: ev.id, text: ev.text});
      case 'message_removed':
        return this.emit('message_removed', {room: ev.room, id: ev.id});
      case 'dm':
      case 'dm_typing':
      case 'dm_read':
      case 'dm_removed':
      case 'dm_gap':
      case 'dm_sent':
      case 'dm_opened':
      case 'dm_resumed':
        return this.emit(ev.type, /** @type {any} */ (ev));
      case 'matched':
      case 'ticket_expired':
      case 'party_invite':
      case 'party_update':
        return this.emit(ev.type, /** @type {MatchEvent} */ (ev));
      default:
        return this.emit('unknown', ev);
    }
  }

  /**
   * @private
   * @param {ServerEvent} ev
   */
  onHello(ev) {
    const gen = this.gen;
    clearTimeout(this.timer);
    this.ready = true;
    this.openedAt = Date.now();
    this.failedOpens = 0;
    if (!this.fellBack) {
      this.mainFails = 0;
      this.mainUp = true;
    }
    this.stats.connections++;
    this.hello = {user: String(ev.user ?? ''), node: String(ev.node ?? ''), motd: String(ev.motd ?? ''), data: ev.data ?? null};
    const reconnected = this.stats.connections > 1;
    // In the order the server must see them: the rooms back (each from
    // its last delivered message), explicit leaves, joins, then the says
    // not acknowledged yet with their own refs, then read marks.
    for (const [id, r] of this.roomMap) {
      const ref = this.nextRef('r');
      this.resumes.set(ref, id);
      /** @type {Record<string, unknown>} */
      // In the room with nothing received yet: everything sent since is
      // ours, so resume from the room's start (without `after` a resume is a
      // join: the latest 50, the rest skipped).
      this.send({type: 'resume', room: id, after: r.lastId || ROOM_START, ref});
    }
    for (const [ref, l] of this.leaves) this.sendLeave(ref, l.room);
    for (const [ref, j] of this.joins) this.send({type: 'join', lobby: j.lobby, ref});
    for (const [ref, e] of this.enters) this.send(enterFrame(e.room, e.after, ref));
    for (const [ref, s] of this.says) {
      if (s.sent > 0) this.stats.resent++;
      this.sendSay(ref, s);
    }
    for (const [room, id] of this.reads) this.sendRead(room, id);
    const every = this.o.pingInterval ?? 20000;
    if (every > 0) this.pinger = setInterval(() => void this.ping().catch(() => {}), every);
    this.setState('open');
    const h = {...this.hello, reconnected, transport: this.transport};
    for (const w of this.waiting.splice(0)) w.resolve(h);
    if (gen === this.gen) this.emit('open', h);
  }

  /**
   * @private
   * @param {Room} room
   */
  onJoined(room) {
    if (!room || typeof room.id !== 'string') return;
    const had = this.roomMap.get(room.id);
    if (had) had.room = room;
    else {
      // An enter after a kept position starts the room there: what the
      // replay sends again is dropped, and a reconnect resumes from it.
      let after;
      for (const e of this.enters.values()) if (e.room === room.id && e.after) after = e.after;
      this.roomMap.set(room.id, {room, lastId: after});
    }
    for (const [ref, id] of this.resumes) if (id === room.id) this.resumes.delete(ref);
    for (const [ref, e] of this.enters) {
      if (e.room === room.id) {
        this.enters.delete(ref);
        e.resolve(room);
      }
    }
    for (const [ref, j] of this.joins) {
      if (j.lobby === room.lobby) {
        this.joins.delete(ref);
        j.resolve(room);
        break;
      }
    }
    this.emit('joined', {room, resumed: had !== undefined});
  }

  /**
   * @private
   * @param {Message} m
   */
  onMessage(m) {
    if (!m || typeof m.id !== 'string') return;
    const r = this.roomMap.get(m.room);
    if (!r) return; // a room we left: its last events before the leave took effect
    if (r.lastId !== undefined && compareIds(m.id, r.lastId) <= 0) {
      this.stats.duplicates++;
      return;
    }
    r.lastId = m.id;
    this.emit('message', {message: m, room: m.room});
  }

  /**
   * @private
   * @param {ServerEvent} ev
   */
  onAck(ev) {
    const s = this.says.get(ev.ref);
    if (!s) return;
    this.says.delete(ev.ref);
    s.resolve({id: ev.id, room: ev.room, ref: ev.ref});
  }

  /**
   * @private
   * @param {ServerEvent} ev
   */
  onError(ev) {
    const err = new ChatdError({
      code: String(ev.code), message: String(ev.message ?? ev.code), ref: ev.ref, room: ev.room,
      retryAfter: ev.code === ErrorCodes.RATE_LIMITED ? waitFromMessage(ev.message) : undefined,
    });
    const ref = typeof ev.ref === 'string' ? ev.ref : '';
    const say = this.says.get(ref);
    if (say) {
      this.says.delete(ref);
      say.reject(err);
      return;
    }
    const rpc = this.rpcs.get(ref);
    if (rpc) {
      this.rpcs.delete(ref);
      rpc.reject(err);
      return;
    }
    const join = this.joins.get(ref);
    if (join) {
      this.joins.delete(ref);
      join.reject(err);
      return;
    }
    const leave = this.leaves.get(ref);
    if (leave) {
      this.leaves.delete(ref);
      leave.reject(err);
      return;
    }
    const enter = this.enters.get(ref);
    if (enter) {
      this.enters.delete(ref);
      enter.reject(err);
      return;
    }
    const resumed = this.resumes.get(ref);
    if (resumed) {
      // The seat is gone for good (room full, seated elsewhere …).
      this.resumes.delete(ref);
      this.roomMap.delete(resumed);
      this.emit('left', {room: resumed, reason: 'resume_failed', error: err});
      return;
    }
    if (err.code === ErrorCodes.RESUME_GAP && err.room) {
      this.emit('resume_gap', {room: err.room, error: err});
      return;
    }
    if (err.code === ErrorCodes.NOT_SEATED && err.room && !ref && this.roomMap.has(err.room)) {
      // The seat lapsed (the lease ran out): take it back where we were.
      const r = /** @type {RoomState} */ (this.roomMap.get(err.room));
      const rref = this.nextRef('r');
      this.resumes.set(rref, err.room);
      this.send({type: 'resume', room: err.room, after: r.lastId || ROOM_START, ref: rref});
    }
    this.emit('error', {error: err});
  }

  /** @private */
  onPong() {
    const p = this.pongs.shift();
    if (!p) return;
    clearTimeout(p.timer);
    p.resolve(Date.now() - p.at);
  }

  /**
   * @private
   * @param {string} room
   */
  onLeft(room) {
    if (!this.roomMap.delete(room)) return;
    this.emit('left', {room, reason: 'elsewhere'});
  }

  // ---- frames ----

  /**
   * @private
   * @param {string} kind
   */
  nextRef(kind) {
    this.refs++;
    return `${kind}${this.refPrefix}${this.refs}`;
  }

  /**
   * @private
   * @param {Record<string, unknown>} frame
   */
  send(frame) {
    return this.ready && this.t !== null && this.t.send(frame);
  }

  /**
   * @param {string} ref
   * @param {{room: string, text: string, sent: number}} s
   * @private
   */
  sendSay(ref, s) {
    if (this.send({type: 'say', room: s.room, text: s.text, ref})) s.sent = this.gen;
  }

  /**
   * @param {string} ref
   * @param {string} room
   * @private
   */
  sendLeave(ref, room) {
    if (!this.send({type: 'leave', room, ref})) return;
    // Nothing answers a leave that worked: the pong after it says it was handled.
    void this.ping().then(() => {
      const l = this.leaves.get(ref);
      if (!l) return;
      this.leaves.delete(ref);
      l.resolve();
    }, () => {});
  }

  /**
   * @param {string} room
   * @param {string} id
   * @private
   */
  sendRead(room, id) {
    if (this.send({type: 'read', room, id, ref: this.nextRef('m')})) {
      this.reads.delete(room);
      this.readSent.set(room, id);
    }
  }

  // ---- calls ----

  /**
   * sendDirect sends a direct message (a `dm_send` frame; `ref` is its
   * idempotency key: send the same ref again after a reconnect and it is
   * stored once). A `dm_sent` event with the ref answers, and a `dm` event
   * reaches both users. Returns false when not connected.
   * @param {string} to a user name or a conversation id
   * @param {string} text
   * @param {string} [ref]
   * @returns {boolean}
   */
  sendDirect(to, text, ref = this.nextRef('d')) {
    return this.send({type: 'dm_send', to, text, ref});
  }

  /**
   * resumeDirect asks for a conversation's messages after an id (after a
   * reconnect): `dm` events, each once, then `dm_resumed`.
   * @param {string} to a user name or a conversation id
   * @param {string} after
   * @returns {boolean}
   */
  resumeDirect(to, after) {
    return this.send({type: 'dm_resume', to, after, ref: this.nextRef('e')});
  }

  /**
   * typingDirect tells the other user of a conversation the user is typing.
   * @param {string} to
   * @returns {boolean}
   */
  typingDirect(to) {
    return this.send({type: 'dm_typing', to, ref: this.nextRef('t')});
  }

  /**
   * markDirectRead marks a conversation read up to a message id (the
   * user's connections get `dm_read`).
   * @param {string} to
   * @param {string} id
   * @returns {boolean}
   */
  markDirectRead(to, id) {
    return this.send({type: 'dm_read', to, id, ref: this.nextRef('m')});
  }


  /**
   * join takes a seat in the lobby and resolves with the room (as soon as
   * `joined` arrives; its latest messages follow as `message` events).
   * @param {string} lobby
   * @param {{signal?: AbortSignal}} [o]
   * @returns {Promise<Room>}
   */
  join(lobby, o = {}) {
    return this.call(o.signal, (ref, resolve, reject) => {
      this.joins.set(ref, {lobby, resolve, reject});
      this.send({type: 'join', lobby, ref});
      return () => this.joins.delete(ref);
    });
  }

  /**
   * enter takes the user's seat in one given room, by its id — a match's
   * room (the `room` of a `matched` event), or a room whose seat lapsed —
   * with a `resume` frame without `after` (over SSE, POST
   * /rooms/{room}/join), and resolves with the room as soon as its
   * `joined` arrives (its latest 50 messages follow as `message` events).
   * It rejects with the ChatdError of the frame (`forbidden`: a match
   * room of other players; `unknown_room`, `room_full`,
   * `seated_elsewhere`). A room the client is in already resolves at
   * once. While disconnected it waits for the next connection.
   *
   * With `after`, a position the application kept (the `lastId` of
   * `rooms()`, saved before a page reload or a restart), the server
   * replays the messages after it instead of the latest 50, and the
   * client drops any it is sent again: nothing missed, nothing twice. A
   * position no longer in history is a `resume_gap` event, then the
   * latest messages. Over the SSE fallback, `after` is not sent
   * (`POST /rooms/{room}/join` replays nothing): read what was missed
   * with `ChatdClient.history(room, {after})`.
   * @param {string} room
   * @param {{signal?: AbortSignal, after?: string}} [o]
   * @returns {Promise<Room>}
   */
  enter(room, o = {}) {
    return this.call(o.signal, (ref, resolve, reject) => {
      const have = this.roomMap.get(room);
      if (have) {
        resolve(have.room);
        return () => {};
      }
      this.enters.set(ref, {room, after: o.after || undefined, resolve, reject});
      this.send(enterFrame(room, o.after, ref));
      return () => this.enters.delete(ref);
    });
  }

  /**
   * say sends a message and resolves with its ack (the stored id), or
   * rejects with a ChatdError of the frame's code. A say not acknowledged
   * when the connection drops is sent again, with the same ref, on the
   * next one (the server answers a ref it stored already with the
   * original id). Aborting stops waiting; a say already sent may still
   * be stored. `ref` may be given (up to 64 characters, unique per
   * session) to re-send a say across page loads.
   * @param {string} room
   * @param {string} text
   * @param {{signal?: AbortSignal, ref?: string}} [o]
   * @returns {Promise<Ack>}
   */
  say(room, text, o = {}) {
    return this.call(o.signal, (ref, resolve, reject) => {
      const frame = {type: 'say', room, text, ref};
      if (encoder.encode(JSON.stringify(frame)).length > MAX_FRAME) {
        reject(new ChatdError({code: ClientCodes.FRAME_TOO_LARGE, message: 'the message is larger than a 64 KiB frame', room, ref}));
        return () => {};
      }
      const s = {room, text, resolve, reject, sent: 0};
      this.says.set(ref, s);
      this.sendSay(ref, s);
      return () => this.says.delete(ref);
    }, o.ref);
  }

  /**
   * leave frees the seat (for all the user's connections) and stops the
   * room's events; it resolves once the server handled it.
   * @param {string} room
   * @param {{signal?: AbortSignal}} [o]
   * @returns {Promise<void>}
   */
  leave(room, o = {}) {
    this.roomMap.delete(room);
    this.reads.delete(room);
    return this.call(o.signal, (ref, resolve, reject) => {
      this.leaves.set(ref, {room, resolve, reject});
      this.sendLeave(ref, room);
      return () => this.leaves.delete(ref);
    });
  }

  /**
   * typing tells the room's other members the user is typing; at most one
   * frame per room per typingInterval goes out (the server relays no
   * more). It returns whether a frame was sent.
   * @param {string} room
   * @returns {boolean}
   */
  typing(room) {
    const now = Date.now();
    if (now - (this.typed.get(room) ?? -Infinity) < (this.o.typingInterval ?? 2000)) return false;
    if (!this.send({type: 'typing', room, ref: this.nextRef('t')})) return false;
    this.typed.set(room, now);
    return true;
  }

  /**
   * read sets the user's read mark of a room to id (it never moves
   * backwards); while disconnected the latest mark waits for the next
   * connection. Failures come as `error` events.
   * @param {string} room
   * @param {string} id
   */
  read(room, id) {
    const last = this.reads.get(room) ?? this.readSent.get(room);
    if (last !== undefined && compareIds(id, last) <= 0) return;
    this.reads.set(room, id);
    this.sendRead(room, id);
  }

  /**
   * rpc calls a method of the application's backend (the server's rpc
   * hook, docs/PROTOCOL.md "Hooks") with data (any JSON value; undefined =
   * none) and resolves with the backend's data (null when it gave none).
   * It rejects with a ChatdError: `hook_denied` (the backend refused; its
   * reason is the message), `hook_unavailable`, `not_found` (the server
   * has no rpc hook), `rate_limited`, `bad_name`, `too_large`; `network`
   * when not connected or when the connection drops before the answer (a
   * call is never sent twice: the backend may have run it).
   * @param {string} method
   * @param {unknown} [data]
   * @param {{signal?: AbortSignal}} [o]
   * @returns {Promise<unknown>}
   */
  rpc(method, data, o = {}) {
    return this.call(o.signal, (ref, resolve, reject) => {
      /** @type {Record<string, unknown>} */
      const frame = {type: 'rpc', method, ref};
      if (data !== undefined) frame.data = data;
      if (encoder.encode(JSON.stringify(frame)).length > MAX_FRAME) {
        reject(new ChatdError({code: ClientCodes.FRAME_TOO_LARGE, message: 'the call is larger than a 64 KiB frame', ref}));
        return () => {};
      }
      if (!this.send(frame)) {
        reject(new ChatdError({code: ClientCodes.NETWORK, message: 'not connected'}));
        return () => {};
      }
      this.rpcs.set(ref, {resolve, reject});
      return () => this.rpcs.delete(ref);
    });
  }

  /**
   * ping resolves with the round trip in ms once the pong arrives; the
   * server answers frames in order, so by then every frame sent before
   * was handled. No pong within pongTimeout drops the connection.
   * @param {{signal?: AbortSignal}} [o]
   * @returns {Promise<number>}
   */
  ping(o = {}) {
    return this.call(o.signal, (_ref, resolve, reject) => {
      const gen = this.gen;
      if (!this.send({type: 'ping'})) {
        reject(new ChatdError({code: ClientCodes.NETWORK, message: 'not connected'}));
        return () => {};
      }
      const p = {resolve, reject, at: Date.now(), timer: setTimeout(() => {
        if (gen === this.gen) this.drop(gen, 'no pong in time');
      }, this.o.pongTimeout ?? 10000)};
      this.pongs.push(p);
      return () => {
        const i = this.pongs.indexOf(p);
        if (i >= 0) this.pongs[i] = {...p, resolve: () => {}, reject: () => {}};
      };
    });
  }

  /**
   * rooms lists the rooms the client is in, with the last message
   * delivered in each.
   * @returns {RoomState[]}
   */
  rooms() {
    return [...this.roomMap.values()].map((r) => ({room: r.room, lastId: r.lastId}));
  }

  /**
   * call runs start with a new ref and wires the signal: abort rejects
   * with `aborted` and runs the undo start returned.
   * @template T
   * @param {AbortSignal | undefined} signal
   * @param {(ref: string, resolve: (v: T) => void, reject: (e: ChatdError) => void) => () => void} start
   * @param {string} [ref]
   * @returns {Promise<T>}
   * @private
   */
  call(signal, start, ref) {
    return new Promise((resolve, reject) => {
      if (this.state === 'closed') {
        reject(closedError('the client is closed: connect() first'));
        return;
      }
      if (signal?.aborted) {
        reject(new ChatdError({code: ClientCodes.ABORTED, message: 'the call was aborted', cause: signal.reason}));
        return;
      }
      const onAbort = () => {
        undo();
        reject(new ChatdError({code: ClientCodes.ABORTED, message: 'the call was aborted', cause: signal?.reason}));
      };
      const undo = start(ref ?? this.nextRef('c'), (v) => {
        signal?.removeEventListener('abort', onAbort);
        resolve(v);
      }, (e) => {
        signal?.removeEventListener('abort', onAbort);
        reject(e);
      });
      signal?.addEventListener('abort', onAbort, {once: true});
    });
  }
}

/**
 * enterFrame is the resume frame of an enter: after the kept position, if any.
 * @param {string} room
 * @param {string | undefined} after
 * @param {string} ref
 * @returns {Record<string, unknown>}
 */
function enterFrame(room, after, ref) {
  return after ? {type: 'resume', room, after, ref} : {type: 'resume', room, ref};
}

/**
 * @param {string} message
 * @param {unknown} [cause]
 * @returns {ChatdError}
 */
function closedError(message, cause) {
  return new ChatdError({code: ClientCodes.CLOSED, message, cause});
}
