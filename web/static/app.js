// chatd's browser client: sign in, one room at a time, live over the
// SDK's realtime client (conn.js), which reconnects and resumes
// (PROTOCOL.md, "WebSocket").

import {api, session, guestTokens, seg, userName, lobbyName} from './api.js';
import {realtime, pageRefs, transportName} from './conn.js';
import {ChatView} from './chat.js';
import {Board} from './board.js';
import {Direct} from './direct.js';
import {h, $, avatar, setText} from './dom.js';

const NOTICES_SEEN = 'chatd.notices';
// At most one typing frame per room this often: the server relays one a
// user and room every 2 s and drops the rest, so a little more than that
// keeps network jitter from getting a frame dropped.
const TYPING_EVERY = 2200;
const TYPING_SHOWN = 5000; // a typing indicator lasts this long
const LOBBIES_EVERY = 10000; // the lobby list and unread counts refresh
const WIDE = '(min-width: 900px)';
const MATCH_LOBBY = 'mm.'; // a match's private room lives in a lobby of its own (PROTOCOL.md, "Matchmaking")
const MATCH_SKILL = 1000; // the browser client has no rating: every page queues at the same skill

boot();

async function boot() {
  const s = session.load();
  if (s) {
    try {
      const settings = await api('GET', '/settings', {token: s.token});
      startApp(s, settings);
      return;
    } catch (err) {
      if (err.status === 401) session.clear();
      else {
        // The server is down or busy: try the app anyway, it reconnects.
        startApp(s, null);
        return;
      }
    }
  }
  showSignIn();
}

function showSignIn(message) {
  $('app').hidden = true;
  $('ended').hidden = true;
  $('signin').hidden = false;
  const form = $('signin-form');
  const name = $('signin-name');
  setText($('signin-error'), message || '');
  name.focus();
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const user = name.value.trim();
    const lobby = $('signin-lobby').value.trim() || 'general';
    name.removeAttribute('aria-invalid');
    if (!userName.test(user)) {
      fail('A name is 1–32 letters, digits, _ or -.', name);
      return;
    }
    if (!lobbyName.test(lobby)) {
      fail('A lobby name is 1–64 letters, digits, _, . or -.', $('signin-lobby'));
      return;
    }
    const button = form.querySelector('button[type=submit]');
    button.disabled = true;
    try {
      // A guest who holds this name in another tab sends that tab's token:
      // the server then gives this tab a session of the same guest instead
      // of answering name_taken.
      const res = await api('POST', '/session', {body: {user}, token: guestTokens.get(user)});
      const s = {token: res.token, user: res.user, lobby};
      session.save(s);
      guestTokens.set(res.user, res.token);
      let settings = null;
      try {
        settings = await api('GET', '/settings', {token: s.token});
      } catch {
        settings = null;
      }
      startApp(s, settings);
    } catch (err) {
      if (err.code === 'name_taken') {
        fail(`The name “${user}” is in use by another guest right now. Pick another name, or wait until they sign out.`, name);
      } else if (err.code === 'banned') {
        fail(`“${user}” is banned: ${err.message.replace(/^you are /, '')}.`, name);
      } else {
        fail(err.message, name);
      }
    } finally {
      button.disabled = false;
    }
  });

  function fail(msg, field) {
    setText($('signin-error'), msg);
    field.setAttribute('aria-invalid', 'true');
    field.focus();
  }
}

function startApp(s, initialSettings) {
  $('signin').hidden = true;
  $('app').hidden = false;
  setText($('me-name'), s.user);
  $('lobby-input').value = s.lobby;

  const st = {
    token: s.token,
    me: s.user,
    lobby: s.lobby,
    room: null, // the joined Room
    node: '',
    ready: false, // joined (or resumed) on the current connection
    nextRef: pageRefs(),
    settings: {},
    noticesSeen: loadSeen(),
    inflight: null, // the say sent and not yet acked: one at a time, in order
    holdTimer: 0, // the send queue waits out a rate limit
    typers: new Map(), // user -> when their indicator ends
    typingSent: 0, // when we last sent a typing frame
    typingTimer: 0, // a typing frame due when TYPING_EVERY is up
    unread: {}, // room -> count, from GET /unread
    unseen: 0, // messages of others in the current room not seen yet
    readSent: '', // the last id we marked read in the current room
    lobbies: [],
    lobbiesSoon: 0, // a lobby list refresh after presence changed
    reconnects: 0,
    ended: false,
    // Quick match: the waiting ticket, its queue and since when, the tick
    // of the waiting time, the last ticket matched or expired (its events
    // may overtake the answer to the POST), a request in flight, and the
    // match room entered (or being entered).
    match: {ticket: null, queue: '', since: 0, timer: 0, ended: '', busy: false, room: '', trouble: 0},
  };
  const view = new ChatView(st.me);
  view.onBottom = () => markSeen();
  const app = $('app');
  const board = new Board({token: st.token, me: st.me, visible: () => sideVisible('board'), message: (u) => direct.openWith(u)});

  const rt = realtime(st.token);
  rt.on('state', ({state}) => connState(state));
  rt.on('disconnected', (d) => disconnected(d));
  rt.on('open', (hello) => onHello(hello));
  rt.on('joined', ({room}) => onJoined(room));
  rt.on('left', (l) => onLeft(l));
  rt.on('message', ({message}) => onMessage(message));
  rt.on('message_removed', (f) => onRemoved(f));
  rt.on('presence', (f) => onPresence(f));
  rt.on('typing', (f) => onTyping(f));
  rt.on('settings', ({key, value}) => onSetting(key, value));
  rt.on('notice', (f) => onNotice(f));
  rt.on('matched', (f) => onMatched(f));
  rt.on('ticket_expired', (f) => onExpired(f));
  rt.on('resume_gap', () => {
    // What we missed is no longer in history: the messages that follow
    // are the latest.
    view.gap();
    chatError('Some messages were too old to replay; showing the latest.');
  });
  rt.on('error', ({error}) => onError(error));
  rt.on('closed', ({code, text}) => closedByServer(code, text));
  const direct = new Direct({
    token: st.token, me: st.me, rt, nextRef: st.nextRef,
    show: () => selectTab('direct'), visible: () => sideVisible('direct'),
  });

  if (initialSettings) applySettings(initialSettings.values || {});
  setupTabs();
  setupComposer();
  setupLobbies();
  setupStatus();
  setupMatch();
  $('signout').addEventListener('click', signOut);
  $('motd-close').addEventListener('click', () => { $('motd').hidden = true; });
  document.addEventListener('visibilitychange', () => markSeen());
  window.addEventListener('focus', () => markSeen());

  rt.connect().catch(() => {}); // a client that stops for good says why in 'closed'
  join(st.lobby);
  board.start();
  direct.start();
  $('composer-input').focus();

  // ---- events ----

  function onHello(hello) {
    st.node = hello.node || '';
    setText($('conn-node'), st.node || '—');
    showMOTD(hello.motd || '');
    latency();
    // Settings may have changed while we were away.
    api('GET', '/settings', {token: st.token}).then((r) => applySettings(r.values || {}), () => {});
    // A ticket may have been matched or expired while we were away.
    if (st.match.ticket) checkTicket();
    // The client resumes the room by itself (from the last message it
    // delivered) and re-sends the say not acknowledged yet.
  }

  // join takes a seat in lobby; from is the lobby to go back to when a
  // switch fails.
  function join(lobby, from) {
    rt.join(lobby).catch((err) => {
      if (err.code === 'closed' || err.code === 'aborted' || st.ended) return;
      if (from !== undefined) {
        setText($('lobby-error'), err.message);
        if (!st.room && lobby === st.lobby) {
          st.lobby = from;
          join(from);
          renderLobbies();
        }
        return;
      }
      chatError(err.message);
    });
  }

  function onJoined(room) {
    if (!room || !room.id) return;
    const lobby = room.lobby || '';
    // A match room is entered by its id, never by its lobby: st.lobby stays
    // the lobby to go back to. While in (or entering) a match room, only
    // that room is wanted.
    const match = lobby.startsWith(MATCH_LOBBY);
    const wanted = st.match.room ? room.id === st.match.room : !match && (!lobby || lobby === st.lobby);
    if (!wanted) {
      // The answer to a switch the user has moved on from: give the seat up.
      if (!st.room || st.room.id !== room.id) rt.leave(room.id).catch(() => {});
      return;
    }
    const same = st.room && st.room.id === room.id;
    if (!same) {
      view.reset();
      st.unseen = 0;
      st.readSent = '';
      st.inflight = null;
      st.typers.clear();
      renderTyping();
    }
    st.room = {...room, members: [...(room.members || [])]};
    if (!match) st.lobby = lobby || st.lobby;
    st.ready = true;
    session.save({token: st.token, user: st.me, lobby: st.lobby});
    $('lobby-input').value = st.lobby;
    renderRoom();
    renderLobbies();
    // The pong to this ping comes after the history the server sends for
    // this join: then what we typed offline goes out, and what we have not
    // read yet is counted.
    rt.ping().then(() => {
      if (!st.ready || !st.room || st.room.id !== room.id) return;
      for (const p of view.unconfirmed()) {
        if (p.room && p.room !== st.room.id) view.discard(p);
      }
      pump();
      refreshUnread();
      markSeen();
    }, () => {});
  }

  function onLeft({room, reason, error}) {
    if (!st.room || room !== st.room.id) return;
    const name = roomName(st.room);
    st.room = null;
    st.ready = false;
    if (room === st.match.room) st.match.room = '';
    if (reason === 'resume_failed') {
      // The seat is gone for good (room full, unknown room): start over
      // in the lobby.
      chatError(`Could not get back into ${name}: ${error ? error.message : 'the seat is gone'}. Joining ${st.lobby} again.`);
    } else {
      // Another tab of ours left this room: the seat is gone for all of them.
      chatError(`You left ${name} in another tab. Joining ${st.lobby} again.`);
    }
    join(st.lobby);
  }

  function onMessage(m) {
    if (!m || !st.room || m.room !== st.room.id) return;
    if (!view.add(m)) return;
    if (st.typers.delete(m.from)) renderTyping();
    if (m.from !== st.me) {
      if (seen()) markSeen();
      else {
        st.unseen++;
        renderUnread();
      }
    }
  }

  function onRemoved(f) {
    if (!st.room || f.room !== st.room.id || !f.id) return;
    view.remove(f.id);
  }

  function onPresence(f) {
    if (!st.room || f.room !== st.room.id) return;
    const set = new Set(st.room.members);
    if (f.state === 'joined') set.add(f.user);
    else if (f.state === 'left') {
      set.delete(f.user);
      if (st.typers.delete(f.user)) renderTyping();
    }
    st.room.members = [...set];
    renderRoom();
    // The lobby's online count changed with it: ask soon, once for a burst.
    clearTimeout(st.lobbiesSoon);
    st.lobbiesSoon = setTimeout(refreshLobbies, 1000);
  }

  function onTyping(f) {
    if (!st.room || f.room !== st.room.id || !f.user || f.user === st.me) return;
    st.typers.set(f.user, Date.now() + TYPING_SHOWN);
    renderTyping();
  }

  function onSetting(key, value) {
    st.settings[key] = value;
    if (key === 'motd') showMOTD(value);
    if (key === 'room.capacity' && st.room) {
      st.room.capacity = value;
      renderRoom();
    }
    if (key === 'message.max_length') countChars();
  }

  function applySettings(values) {
    for (const [k, v] of Object.entries(values)) {
      if (st.settings[k] !== v) onSetting(k, v);
    }
  }

  function onNotice(f) {
    if (!f.id || st.noticesSeen.includes(f.id)) return;
    st.noticesSeen.push(f.id);
    if (st.noticesSeen.length > 200) st.noticesSeen.splice(0, st.noticesSeen.length - 200);
    sessionStorage.setItem(NOTICES_SEEN, JSON.stringify(st.noticesSeen));
    const box = $('notices');
    const el = h('div', {class: 'notice', 'data-testid': 'notice', 'data-id': f.id, role: 'status'},
      h('span', {class: 'notice-tag'}, 'NOTICE'),
      h('span', {class: 'notice-text'}, f.text),
      h('button', {type: 'button', class: 'ghost icon', 'aria-label': 'Dismiss the notice', onclick: () => el.remove()}, '×'));
    box.appendChild(el);
    while (box.children.length > 4) box.firstElementChild.remove();
  }

  // onError is told of a failure no call waits for: typing and read marks
  // are best effort, and a lapsed seat the client takes back by itself.
  function onError(err) {
    if (err.ref || err.code === 'not_seated') return;
    chatError(err.message);
  }

  // ---- sending: one say in flight, in order ----

  function say(text) {
    const p = {ref: st.nextRef(), room: st.room ? st.room.id : '', text, state: 'queued'};
    view.addPending(p);
    pump();
  }

  // pump sends the oldest queued message when nothing is in flight and no
  // rate limit is being waited out. Acks come in order, so sending one at a
  // time keeps the room's order the order typed, across rate limits and
  // reconnects, at a cost nobody typing by hand can notice. A say in
  // flight when the connection drops is re-sent by the client, with its
  // ref, on the next one.
  function pump() {
    if (st.inflight || st.holdTimer || !st.ready || rt.state !== 'open' || !st.room) return;
    const p = view.next();
    if (!p) return;
    p.room = st.room.id;
    st.inflight = p.ref;
    view.setState(p, 'pending');
    rt.say(p.room, p.text, {ref: p.ref}).then((ack) => {
      view.ack(p.ref, ack.id);
      if (st.inflight === p.ref) {
        st.inflight = null;
        pump();
      }
    }, (err) => {
      const mine = st.inflight === p.ref;
      if (mine) st.inflight = null;
      if (err.code === 'closed' || st.ended) return;
      if (view.pending.get(p.ref) !== p) {
        if (mine) pump();
        return; // the view moved on (another room)
      }
      if (err.code === 'rate_limited') {
        holdFor(p, waitOf(err.retryAfter));
        return;
      }
      view.fail(p.ref, err.code, err.message, {
        retry: (q) => { view.setState(q, 'queued'); pump(); },
        discard: (q) => view.discard(q),
      });
      pump();
    });
  }

  // holdFor waits out a rate limit, then sends p again, by itself.
  function holdFor(p, ms) {
    const until = Date.now() + ms;
    const tick = () => {
      const left = until - Date.now();
      if (left <= 0) {
        st.holdTimer = 0;
        if (p.state === 'waiting') view.setState(p, 'queued');
        pump();
        return;
      }
      view.setState(p, 'waiting', `sending too fast: sending in ${Math.ceil(left / 1000)} s`);
      st.holdTimer = setTimeout(tick, Math.min(left, 1000));
    };
    clearTimeout(st.holdTimer);
    tick();
  }

  // ---- typing, unread, read marks ----

  // typed announces typing: at once when no typing frame went out in the
  // last TYPING_EVERY, else once when that time is up (the server drops
  // more than one a user and room in that time).
  function typed() {
    if (!st.ready || !st.room || rt.state !== 'open') return;
    const wait = st.typingSent + TYPING_EVERY - Date.now();
    if (wait > 0) {
      if (!st.typingTimer) {
        st.typingTimer = setTimeout(() => {
          st.typingTimer = 0;
          if ($('composer-input').value.trim() !== '') typed();
        }, wait);
      }
      return;
    }
    if (rt.typing(st.room.id)) st.typingSent = Date.now();
  }

  function renderTyping() {
    const now = Date.now();
    for (const [u, until] of st.typers) if (until <= now) st.typers.delete(u);
    const names = [...st.typers.keys()].sort();
    let text = '';
    if (names.length === 1) text = `${names[0]} is typing…`;
    else if (names.length === 2) text = `${names[0]} and ${names[1]} are typing…`;
    else if (names.length > 2) text = `${names.length} people are typing…`;
    setText($('typing'), text);
    clearTimeout(renderTyping.timer);
    if (names.length) {
      const next = Math.min(...st.typers.values()) - now;
      renderTyping.timer = setTimeout(renderTyping, Math.max(100, next));
    }
  }

  // seen says whether the newest messages are in front of the user: the
  // page is visible, the chat panel shown, the list scrolled to its end.
  function seen() {
    return document.visibilityState === 'visible' && panelVisible('chat') && view.nearBottom();
  }

  // markSeen sends a read mark for the newest message once it is seen.
  function markSeen() {
    if (!st.room || !st.ready || !seen()) return;
    st.unseen = 0;
    if (st.unread[st.room.id]) st.unread[st.room.id] = 0;
    renderUnread();
    const id = view.lastId;
    if (!id || id <= st.readSent) return;
    st.readSent = id;
    rt.read(st.room.id, id); // while offline, it waits for the next connection
  }

  async function refreshUnread() {
    try {
      const r = await api('GET', '/unread', {token: st.token});
      st.unread = r.rooms || {};
      if (st.room && st.unread[st.room.id] !== undefined && !seen()) {
        st.unseen = Math.max(st.unseen, st.unread[st.room.id]);
      }
      renderUnread();
    } catch {
      // the badges keep their last counts
    }
  }

  function unreadOf(room) {
    if (st.room && room === st.room.id) return st.unseen;
    return st.unread[room] || 0;
  }

  function renderUnread() {
    let total = 0;
    const byLobby = {};
    const rooms = new Set([...Object.keys(st.unread), ...(st.room ? [st.room.id] : [])]);
    for (const room of rooms) {
      const n = unreadOf(room);
      total += n;
      const lobby = room.slice(0, room.lastIndexOf('-'));
      byLobby[lobby] = (byLobby[lobby] || 0) + n;
    }
    for (const li of $('lobbies').children) {
      const badge = li.querySelector('.badge');
      const n = byLobby[li.dataset.lobby] || 0;
      badge.hidden = n === 0;
      setText(badge, n > 99 ? '99+' : String(n));
      badge.setAttribute('aria-label', `${n} unread`);
    }
    const tab = $('people-count');
    tab.hidden = total === 0;
    setText(tab, total > 99 ? '99+' : String(total));
    tab.setAttribute('aria-label', `${total} unread`);
    const jump = $('jump');
    setText(jump, st.unseen > 0 ? `${st.unseen} new message${st.unseen === 1 ? '' : 's'} ↓` : 'New messages ↓');
    const r = st.room;
    const base = r ? `${roomName(r)} — chatd` : 'chatd';
    document.title = st.unseen > 0 ? `(${st.unseen}) ${base}` : base;
  }

  // ---- lobbies ----

  async function refreshLobbies() {
    try {
      const r = await api('GET', '/lobbies?limit=20', {token: st.token});
      st.lobbies = r.lobbies || [];
      setText($('lobbies-error'), '');
    } catch (err) {
      setText($('lobbies-error'), err.message);
    }
    renderLobbies();
  }

  function renderLobbies() {
    const list = [...st.lobbies];
    if (!list.some((l) => l.lobby === st.lobby)) {
      list.unshift({lobby: st.lobby, online: st.room && st.room.lobby === st.lobby ? st.room.members.length : 0, rooms: 1});
    }
    $('lobbies').replaceChildren(...list.map((l) => {
      const current = l.lobby === st.lobby;
      return h('li', {class: 'lobby', 'data-testid': 'lobby', 'data-lobby': l.lobby},
        h('button', {
          type: 'button', class: 'lobby-btn', 'aria-current': current ? 'true' : null,
          onclick: () => switchLobby(l.lobby),
        },
        h('span', {class: 'lobby-name'}, l.lobby),
        h('span', {class: 'lobby-online', 'data-testid': 'lobby-online'}, `${l.online} online`),
        h('span', {class: 'badge', 'data-testid': 'lobby-unread', hidden: true})));
    }));
    renderUnread();
  }

  function switchLobby(lobby) {
    setText($('lobby-error'), '');
    if (!lobbyName.test(lobby)) {
      setText($('lobby-error'), 'A lobby name is 1–64 letters, digits, _, . or -.');
      return;
    }
    if (st.room && lobby === st.room.lobby) {
      selectTab('chat');
      return;
    }
    if (rt.state !== 'open') {
      setText($('lobby-error'), 'Not connected; try again in a moment.');
      return;
    }
    const from = st.lobby;
    if (st.room) rt.leave(st.room.id).catch(() => {});
    st.match.room = '';
    st.room = null;
    st.ready = false;
    st.lobby = lobby;
    st.inflight = null;
    view.reset();
    st.typers.clear();
    renderTyping();
    setText($('room-label'), `${lobby} · joining…`);
    join(lobby, from);
    renderLobbies();
    selectTab('chat');
    setTimeout(refreshLobbies, 500);
  }

  // ---- quick match ----

  // Tickets are taken and cancelled over HTTP (PROTOCOL.md,
  // "Matchmaking"), whatever the live transport; `matched` and
  // `ticket_expired` come as events on it, and the match room is entered
  // by its id (rt.enter).
  function setupMatch() {
    $('quick-match').addEventListener('click', () => {
      if (st.match.busy) return;
      if (st.match.ticket) {
        cancelMatch();
        return;
      }
      if (rt.state !== 'open') {
        // the match is announced on the live connection
        setText($('match-status'), 'Not connected; try again in a moment.');
        return;
      }
      queueMatch();
    });
  }

  // matchQueue is the first queue of the live setting matchmaking.queues.
  function matchQueue() {
    try {
      const names = Object.keys(JSON.parse(st.settings['matchmaking.queues'] || '{}'));
      if (names.length) return names.includes('quick') ? 'quick' : names.sort()[0];
    } catch {
      // a value the server accepted always parses; fall back all the same
    }
    return 'quick';
  }

  async function queueMatch() {
    const queue = matchQueue();
    st.match.queue = queue;
    st.match.busy = true;
    $('quick-match').disabled = true;
    try {
      const r = await api('POST', `/matchmaking/${seg(queue)}/tickets`, {token: st.token, body: {skill: MATCH_SKILL}});
      onQueued(r.ticket || {});
    } catch (err) {
      if (!st.ended) matchReset(`Quick match: ${err.message}`);
    } finally {
      st.match.busy = false;
    }
  }

  async function cancelMatch() {
    const {queue, ticket} = st.match;
    st.match.busy = true;
    $('quick-match').disabled = true;
    try {
      const r = await api('DELETE', `/matchmaking/${seg(queue)}/tickets/${seg(ticket)}`, {token: st.token});
      if (st.match.ticket === ticket) onDequeued(r.ticket || {});
    } catch (err) {
      if (st.match.ticket === ticket && !st.ended) matchReset(`Quick match: ${err.message}`);
    } finally {
      st.match.busy = false;
      if (st.match.ticket === ticket) $('quick-match').disabled = false;
    }
  }

  // checkTicket asks how the waiting ticket is doing: its events may have
  // come while the connection was down.
  async function checkTicket() {
    const {queue, ticket} = st.match;
    try {
      const r = await api('GET', `/matchmaking/${seg(queue)}/tickets/${seg(ticket)}`, {token: st.token});
      if (st.match.ticket !== ticket || !r.ticket) return;
      if (r.ticket.state !== 'waiting') onDequeued(r.ticket);
      else st.match.trouble = r.ticket.trouble_since || 0;
    } catch (err) {
      if (st.match.ticket === ticket && err.code === 'unknown_ticket') matchReset('Quick match ended.');
    }
  }

  function onQueued(t) {
    // The matched event may overtake the answer to our POST.
    if (t.id && t.id === st.match.ended) return;
    st.match.ticket = t.id;
    st.match.queue = t.queue || st.match.queue;
    st.match.since = Date.now();
    $('quick-match').disabled = false;
    setText($('quick-match'), 'Cancel');
    clearInterval(st.match.timer);
    st.match.trouble = 0;
    const tick = () => {
      const s = Math.floor((Date.now() - st.match.since) / 1000);
      // The ticket says when the queue's matcher is failing (trouble_since).
      if (s > 0 && s % 10 === 0) checkTicket();
      const note = st.match.trouble ? ' — matching is failing on the server; still waiting' : '';
      setText($('match-status'), `Looking for players… ${Math.floor(s / 60)}:${String(s % 60).padStart(2, '0')}${note}`);
    };
    tick();
    st.match.timer = setInterval(tick, 1000);
  }

  // onDequeued shows how a ticket ended that we asked about (a cancel, or
  // a check after a reconnect).
  function onDequeued(t) {
    if (t.state === 'matched') {
      // The matched event takes us in; if it was missed, the ticket says where.
      if (t.room) onMatched({ticket: t.id, room: t.room, players: t.players});
      return;
    }
    st.match.ended = t.id || '';
    matchReset(t.state === 'expired' ? 'No match found in time.' : 'Quick match cancelled.');
  }

  function onExpired(f) {
    st.match.ended = f.ticket;
    if (f.ticket !== st.match.ticket) return;
    matchReset('No match found in time; try again.');
  }

  function onMatched(f) {
    if (!f.room) return;
    st.match.ended = f.ticket;
    const others = (f.players || []).filter((u) => u !== st.me);
    matchReset(`Match found with ${others.join(', ') || 'nobody'}.`);
    if (st.match.room === f.room || (st.room && st.room.id === f.room)) return; // in already (another tab took us in)
    if (st.room) rt.leave(st.room.id).catch(() => {});
    st.match.room = f.room;
    st.room = null;
    st.ready = false;
    st.inflight = null;
    view.reset();
    st.typers.clear();
    renderTyping();
    setText($('room-label'), 'match · joining…');
    rt.enter(f.room).catch((err) => {
      if (err.code === 'closed' || err.code === 'aborted' || st.ended || st.match.room !== f.room) return;
      // The reservation lapsed, or the room is gone: back to the lobby.
      st.match.room = '';
      setText($('match-status'), `Could not join the match: ${err.message}.`);
      if (!st.room) join(st.lobby);
    });
    selectTab('chat');
  }

  function matchReset(text) {
    clearInterval(st.match.timer);
    st.match.ticket = null;
    st.match.timer = 0;
    $('quick-match').disabled = false;
    setText($('quick-match'), 'Quick match');
    setText($('match-status'), text);
  }

  function setupLobbies() {
    $('lobby-form').addEventListener('submit', (e) => {
      e.preventDefault();
      switchLobby($('lobby-input').value.trim());
    });
    refreshLobbies();
    setInterval(() => {
      if (document.visibilityState !== 'visible') return;
      refreshLobbies();
      refreshUnread();
    }, LOBBIES_EVERY);
  }

  // ---- view ----

  function renderRoom() {
    const r = st.room;
    if (!r) return;
    const n = r.members.length;
    setText($('room-label'), `${roomName(r)} · ${n}/${r.capacity}`);
    setText($('member-count'), `${n}/${r.capacity}`);
    renderUnread();
    const members = [...r.members].sort((a, b) => (a === st.me ? -1 : b === st.me ? 1 : a.localeCompare(b)));
    $('members').replaceChildren(...members.map((u) => h('li', {class: 'member', 'data-testid': 'member', 'data-user': u},
      avatar(u),
      h('span', {class: 'member-name'}, u),
      u === st.me ? h('span', {class: 'you'}, '(you)')
        : h('button', {type: 'button', class: 'ghost dm-btn', 'data-testid': 'member-message', 'aria-label': `Message ${u}`, onclick: () => direct.openWith(u)}, 'Message'))));
  }

  function showMOTD(text) {
    const motd = typeof text === 'string' ? text : '';
    setText($('motd-text'), motd);
    $('motd').hidden = motd.trim() === '';
  }

  function chatError(text) {
    const el = $('chat-error');
    setText(el, text);
    el.hidden = false;
    clearTimeout(chatError.timer);
    chatError.timer = setTimeout(() => { el.hidden = true; }, 8000);
  }

  // connState shows the client's state: connecting, open (live),
  // reconnecting (the wait is in disconnected), closed.
  function connState(state) {
    const box = $('conn-status');
    box.dataset.state = state === 'reconnecting' ? 'waiting' : state;
    if (state === 'reconnecting') {
      st.ready = false;
      return; // disconnected says how long the wait is
    }
    let text = 'connecting…';
    let via = '';
    if (state === 'open') {
      text = 'live';
      via = transportName(rt.transport);
      setText($('conn-transport'), via === 'SSE' ? 'SSE, sends over HTTP' : `${via}, batched`);
    }
    if (state === 'closed') text = 'offline';
    statusText(text, via);
  }

  function disconnected(d) {
    if (!d.willReconnect) return;
    st.ready = false;
    st.reconnects++;
    setText($('conn-reconnects'), String(st.reconnects));
    statusText(`reconnecting in ${Math.max(1, Math.round((d.delay || 0) / 1000))} s`);
  }

  // statusText shows the state, and while live the transport (WebSocket,
  // or SSE after a fallback).
  function statusText(text, via = '') {
    setText($('conn-text'), text);
    setText($('conn-via'), via);
    $('conn-via-wrap').hidden = via === '';
    $('conn-status').setAttribute('aria-label', `Connection: ${text}${via ? ` · ${via}` : ''}. Show details`);
  }

  // latency measures a round trip for the status details.
  function latency() {
    rt.ping().then((ms) => setText($('conn-latency'), `${ms} ms`), () => {});
  }

  // closedByServer shows why the client stopped for good: the close codes
  // the server decides (or what the session probe found when opens kept
  // failing: an ended session, a ban).
  function closedByServer(code, reason) {
    switch (code) {
      case 4000:
        guestTokens.remove(st.me, st.token);
        end('Your session ended', reason === 'signed out' ? 'You signed out in another tab.' : 'Sign in again to keep chatting.', false);
        return;
      case 4001:
        end('You were removed from the chat', reason && reason !== 'kick' ? `A moderator removed you: ${reason}` : 'A moderator removed you from the chat.', true);
        return;
      case 4003:
        if (/^you are banned/.test(reason)) end('You are banned', `${reason}.`, false); // the probe's answer
        else end('You are banned', reason && reason !== 'ban' ? `A moderator banned you: ${reason}` : 'A moderator banned you from the chat.', false);
        return;
      default:
    }
  }

  // end shows why the chat stopped; rejoin offers to connect again.
  function end(title, text, rejoin) {
    if (st.ended) return;
    st.ended = true;
    rt.close();
    board.stop();
    st.room = null;
    st.ready = false;
    setText($('ended-title'), title);
    setText($('ended-text'), text);
    $('ended-rejoin').hidden = !rejoin;
    $('ended').hidden = false;
    app.setAttribute('aria-hidden', 'true');
    app.inert = true;
    $('ended-rejoin').onclick = () => location.reload();
    $('ended-signin').onclick = () => {
      session.clear();
      location.reload();
    };
    (rejoin ? $('ended-rejoin') : $('ended-signin')).focus();
  }

  // roomName is a room as people read it: a match's room is "match" (its
  // number is a long random one, PROTOCOL.md "Matchmaking").
  function roomName(r) {
    if (!r) return 'the room';
    return r.lobby.startsWith(MATCH_LOBBY) ? `${r.lobby} · match` : `${r.lobby} · room ${r.seq}`;
  }

  // ---- controls ----

  function setupStatus() {
    const btn = $('conn-status');
    const box = $('conn-details');
    btn.addEventListener('click', () => {
      box.hidden = !box.hidden;
      btn.setAttribute('aria-expanded', String(!box.hidden));
      if (!box.hidden) latency();
    });
    document.addEventListener('keydown', (e) => {
      if (e.key === 'Escape' && !box.hidden) {
        box.hidden = true;
        btn.setAttribute('aria-expanded', 'false');
        btn.focus();
      }
    });
    document.addEventListener('click', (e) => {
      if (!box.hidden && !box.contains(e.target) && !btn.contains(e.target)) {
        box.hidden = true;
        btn.setAttribute('aria-expanded', 'false');
      }
    });
  }

  function setupComposer() {
    const form = $('composer');
    const input = $('composer-input');
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      // Blank lines and spaces around a message are not part of it.
      const text = input.value.trim();
      if (text === '') return;
      if ([...text].length > maxLength()) {
        countChars();
        input.focus();
        return;
      }
      say(text);
      clearTimeout(st.typingTimer);
      st.typingTimer = 0;
      input.value = '';
      autosize();
      countChars();
      input.focus();
    });
    input.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        form.requestSubmit();
      }
    });
    input.addEventListener('input', () => {
      autosize();
      countChars();
      if (input.value.trim() !== '') typed();
    });
    function autosize() {
      input.style.height = 'auto';
      input.style.height = `${Math.min(input.scrollHeight + 2, 144)}px`;
    }
  }

  function maxLength() {
    return Number(st.settings['message.max_length']) || 2000;
  }

  // countChars shows the length against the limit as you type; over the
  // limit the Send button is off and the count says by how much.
  function countChars() {
    const input = $('composer-input');
    const max = maxLength();
    const n = [...input.value.trim()].length;
    const over = n > max;
    const hint = $('composer-count');
    hint.dataset.over = String(over);
    setText(hint, n === 0 ? '' : over ? `${n}/${max} · ${n - max} too many` : `${n}/${max}`);
    input.setAttribute('aria-invalid', String(over));
    document.querySelector('[data-testid="composer-send"]').disabled = over;
  }

  function setupTabs() {
    for (const tab of document.querySelectorAll('.tab')) {
      tab.addEventListener('click', () => selectTab(tab.dataset.tab));
    }
    const tablist = document.querySelector('.tablist');
    tablist.addEventListener('keydown', (e) => {
      if (e.key !== 'ArrowRight' && e.key !== 'ArrowLeft') return;
      const tabs = [...tablist.querySelectorAll('.tab')].filter((t) => t.offsetParent !== null);
      const i = tabs.indexOf(document.activeElement);
      if (i < 0) return;
      const next = tabs[(i + (e.key === 'ArrowRight' ? 1 : tabs.length - 1)) % tabs.length];
      next.focus();
      selectTab(next.dataset.tab);
    });
    window.matchMedia(WIDE).addEventListener('change', () => selectTab(app.dataset.view));
    selectTab('chat');
  }

  function selectTab(name) {
    app.dataset.view = name;
    if (name === 'board' || name === 'direct') app.dataset.side = name;
    const wide = window.matchMedia(WIDE).matches;
    for (const t of document.querySelectorAll('.tab')) {
      const on = t.dataset.tab === name || (wide && t.dataset.tab === app.dataset.side);
      t.setAttribute('aria-selected', String(on));
      t.tabIndex = on ? 0 : -1;
    }
    if (name === 'board') board.refresh();
    if (name === 'people') refreshLobbies();
    if (name === 'direct') direct.shown();
    if (name === 'chat') {
      $('composer-input').focus();
      markSeen();
    }
  }

  function panelVisible(name) {
    if (window.matchMedia(WIDE).matches) return name !== 'board' || app.dataset.side === name;
    return app.dataset.view === name;
  }

  function sideVisible(name) {
    if (window.matchMedia(WIDE).matches) return app.dataset.side === name;
    return app.dataset.view === name;
  }

  async function signOut() {
    // Leave (the client resolves once the server handled it, or give up
    // after a second), then end the session: the name is free at once.
    if (st.room) {
      await Promise.race([rt.leave(st.room.id).catch(() => {}), new Promise((r) => setTimeout(r, 1000))]);
    }
    st.ended = true;
    rt.close();
    board.stop();
    try {
      await api('DELETE', '/session', {token: st.token});
    } catch {
      // signed out here anyway; the name lapses on its own
    }
    guestTokens.remove(st.me, st.token);
    session.clear();
    location.reload();
  }
}

// waitOf turns a rate_limited error's retryAfter (s, read by the SDK out
// of the message's "wait 1.5 s") into ms, with a floor and a default.
function waitOf(retryAfter) {
  const s = typeof retryAfter === 'number' && Number.isFinite(retryAfter) ? retryAfter : 1;
  return Math.max(200, Math.ceil(s * 1000) + 50);
}

function loadSeen() {
  try {
    const v = JSON.parse(sessionStorage.getItem(NOTICES_SEEN) || '[]');
    return Array.isArray(v) ? v : [];
  } catch {
    return [];
  }
}
