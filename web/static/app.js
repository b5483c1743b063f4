// chatd's browser client: sign in, one room at a time, live over a
// WebSocket that reconnects and resumes (PROTOCOL.md, "WebSocket").

import {api, session, seg, userName, lobbyName} from './api.js';
import {Connection} from './conn.js';
import {ChatView} from './chat.js';
import {Board} from './board.js';
import {Admin} from './admin.js';
import {h, $, avatar, setText} from './dom.js';

const NOTICES_SEEN = 'chatd.notices';

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
  $('signin').hidden = false;
  const form = $('signin-form');
  const name = $('signin-name');
  setText($('signin-error'), message || '');
  name.focus();
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const user = name.value.trim();
    const lobby = $('signin-lobby').value.trim() || 'general';
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
      const res = await api('POST', '/session', {body: {user}});
      const s = {token: res.token, user: res.user, lobby};
      session.save(s);
      let settings = null;
      try {
        settings = await api('GET', '/settings', {token: s.token});
      } catch {
        settings = null;
      }
      startApp(s, settings);
    } catch (err) {
      fail(err.message, name);
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
    ready: false, // joined on the current socket
    gen: 0, // socket generation
    refs: 0,
    control: new Map(), // ref of a join/resume/leave -> what it was
    settings: {},
    noticesSeen: loadSeen(),
    nodes: new Map(), // user -> {node, at}
    failedOpens: 0,
  };
  const view = new ChatView(st.me);
  const app = $('app');
  const board = new Board({token: st.token, me: st.me, visible: () => sideVisible('board')});
  const admin = new Admin({
    token: st.token,
    visible: () => sideVisible('admin'),
    lobby: () => st.lobby,
    room: () => (st.room ? st.room.id : ''),
  });

  const conn = new Connection({
    url: () => `${location.protocol === 'https:' ? 'wss:' : 'ws:'}//${location.host}/ws?token=${encodeURIComponent(st.token)}`,
    onOpen: (gen) => {
      st.gen = gen;
      st.ready = false;
      st.failedOpens = 0;
    },
    onFrame: (f) => handle(f),
    onState: (x) => connState(x),
  });

  if (initialSettings) applySettings(initialSettings.values || {});
  setupTabs();
  setupComposer();
  setupLobbyForm();
  $('signout').addEventListener('click', signOut);
  $('motd-close').addEventListener('click', () => { $('motd').hidden = true; });

  conn.start();
  board.start();
  admin.start().then(() => admin.setValues(st.settings));
  $('composer-input').focus();

  // ---- frames ----

  function handle(f) {
    switch (f.type) {
      case 'hello': return onHello(f);
      case 'joined': return onJoined(f.room);
      case 'message': return onMessage(f.message);
      case 'ack': return view.ack(f.ref, f.id);
      case 'presence': return onPresence(f);
      case 'settings': return onSetting(f.key, f.value);
      case 'notice': return onNotice(f);
      case 'error': return onError(f);
      default: return undefined;
    }
  }

  function onHello(f) {
    st.node = f.node || '';
    setText($('node-label'), st.node ? `node ${st.node}` : '');
    showMOTD(f.motd || '');
    // Settings may have changed while we were away.
    api('GET', '/settings', {token: st.token}).then((r) => applySettings(r.values || {}), () => {});
    if (st.room) {
      // Take the seat back and replay everything after the last message seen.
      sendControl({type: 'resume', room: st.room.id, after: view.lastId}, {kind: 'resume', room: st.room.id});
    } else {
      sendControl({type: 'join', lobby: st.lobby}, {kind: 'join', lobby: st.lobby});
    }
  }

  function onJoined(room) {
    if (!room || !room.id) return;
    const same = st.room && st.room.id === room.id;
    if (!same) view.reset();
    st.room = {...room, members: [...(room.members || [])]};
    st.lobby = room.lobby || st.lobby;
    st.ready = true;
    session.save({token: st.token, user: st.me, lobby: st.lobby});
    $('lobby-input').value = st.lobby;
    renderRoom();
    // The pong to this ping comes after the history the server sends for
    // this join: then what we sent on an earlier socket and never saw is
    // sent again, and what we typed offline goes out.
    const gen = st.gen;
    conn.ping(() => flush(gen));
  }

  function flush(gen) {
    if (gen !== st.gen || !st.ready) return;
    for (const p of view.unconfirmed()) {
      if (p.room && p.room !== st.room.id) {
        view.discard(p);
        continue;
      }
      if (p.state === 'queued' || (p.state === 'pending' && p.gen < gen)) sendSay(p);
    }
  }

  function onMessage(m) {
    if (!m || !st.room || m.room !== st.room.id) return;
    view.add(m);
  }

  function onPresence(f) {
    if (!st.room || f.room !== st.room.id) return;
    const set = new Set(st.room.members);
    if (f.state === 'joined') {
      set.add(f.user);
      st.nodes.delete(f.user); // may have come back through another node
    }
    else if (f.state === 'left') set.delete(f.user);
    st.room.members = [...set];
    renderRoom();
  }

  function onSetting(key, value) {
    st.settings[key] = value;
    admin.setValue(key, value);
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

  function onError(f) {
    const ctl = f.ref ? st.control.get(f.ref) : null;
    if (ctl) {
      st.control.delete(f.ref);
      if (ctl.kind === 'resume') {
        // The seat is gone for good (room full, unknown room): start over
        // in the lobby.
        chatError(`Could not get back into ${roomName(st.room)}: ${f.message} Joining ${st.lobby} again.`);
        st.room = null;
        sendControl({type: 'join', lobby: st.lobby}, {kind: 'join', lobby: st.lobby});
        return;
      }
      if (ctl.kind === 'switch') {
        setText($('lobby-error'), f.message);
        if (!st.room) sendControl({type: 'join', lobby: ctl.from}, {kind: 'join', lobby: ctl.from});
        return;
      }
      chatError(f.message);
      return;
    }
    if (f.code === 'resume_gap') {
      // What we missed is no longer in history: the messages that follow
      // are the latest.
      view.gap();
      chatError('Some messages were too old to replay; showing the latest.');
      return;
    }
    if (f.ref && view.fail(f.ref, f.code, f.message, {retry: (p) => sendSay(p), discard: (p) => view.discard(p)})) {
      return;
    }
    chatError(f.message);
  }

  // ---- sending ----

  function nextRef(prefix) {
    st.refs += 1;
    return `${prefix}-${st.refs}`;
  }

  function sendControl(frame, what) {
    const ref = nextRef('x');
    st.control.set(ref, what);
    if (st.control.size > 50) st.control.delete(st.control.keys().next().value);
    conn.send({...frame, ref});
  }

  function say(text) {
    const p = {ref: nextRef('c'), room: st.room ? st.room.id : '', text, state: 'queued', gen: 0};
    view.addPending(p);
    if (st.ready && conn.open) sendSay(p);
  }

  function sendSay(p) {
    if (!st.ready || !conn.open || !st.room) {
      view.setState(p, 'queued');
      return;
    }
    p.room = st.room.id;
    p.gen = st.gen;
    view.setState(p, 'pending');
    conn.send({type: 'say', room: p.room, text: p.text, ref: p.ref});
  }

  // ---- view ----

  function renderRoom() {
    const r = st.room;
    if (!r) return;
    const n = r.members.length;
    setText($('room-label'), `${r.lobby} · room ${r.seq} · ${n}/${r.capacity}`);
    setText($('people-count'), String(n));
    document.title = `${r.lobby} · room ${r.seq} — chatd`;
    const members = [...r.members].sort((a, b) => (a === st.me ? -1 : b === st.me ? 1 : a.localeCompare(b)));
    $('members').replaceChildren(...members.map((u) => {
      const node = h('span', {class: 'member-node', 'data-testid': 'member-node'}, nodeOf(u));
      return h('li', {class: 'member', 'data-testid': 'member', 'data-user': u},
        avatar(u),
        h('span', {class: 'member-name'}, u),
        u === st.me ? h('span', {class: 'you'}, '(you)') : null,
        node);
    }));
  }

  // nodeOf returns the node a member is served by, as far as we know;
  // unknown ones are looked up (GET /presence/{user}) and shown when known.
  // A node publishes its users' presence periodically, so a user who just
  // connected may not be known yet: an unknown node is asked again soon.
  function nodeOf(user) {
    if (user === st.me) return st.node;
    const c = st.nodes.get(user);
    const fresh = c && Date.now() - c.at < (c.node ? 30000 : 4000);
    if (!fresh && !(c && c.loading)) {
      st.nodes.set(user, {node: c ? c.node : '', at: c ? c.at : 0, loading: true});
      api('GET', `/presence/${seg(user)}`, {token: st.token}).then((p) => {
        const node = p.online ? p.node || '' : '';
        st.nodes.set(user, {node, at: Date.now()});
        if (node) renderRoom();
        else setTimeout(() => { if (st.room && st.room.members.includes(user)) renderRoom(); }, 4500);
      }, () => st.nodes.set(user, {node: '', at: Date.now()}));
    }
    return c ? c.node : '';
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

  function connState(x) {
    const box = $('conn-status');
    box.dataset.state = x.state;
    let text = 'connecting…';
    if (x.state === 'open') text = 'live';
    if (x.state === 'closed') text = 'offline';
    if (x.state === 'waiting') {
      st.ready = false;
      text = `reconnecting in ${Math.max(1, Math.round(x.delay / 1000))} s`;
      if (!x.opened) {
        // A refused handshake looks like a network error to a page: ask the
        // HTTP API whether our token is still good, now and then.
        st.failedOpens++;
        if (st.failedOpens % 3 === 0) checkToken();
      }
    }
    setText($('conn-text'), text);
    box.title = x.attempt ? `attempt ${x.attempt}` : '';
  }

  async function checkToken() {
    try {
      await api('GET', '/settings', {token: st.token});
    } catch (err) {
      if (err.status === 401) {
        conn.stop();
        session.clear();
        location.reload();
      }
    }
  }

  function roomName(r) {
    return r ? `${r.lobby} · room ${r.seq}` : 'the room';
  }

  // ---- controls ----

  function setupComposer() {
    const form = $('composer');
    const input = $('composer-input');
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      // Blank lines and spaces around a message are not part of it.
      const text = input.value.trim();
      if (text === '') return;
      say(text);
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
    });
    function autosize() {
      input.style.height = 'auto';
      input.style.height = `${Math.min(input.scrollHeight + 2, 144)}px`;
    }
  }

  function countChars() {
    const input = $('composer-input');
    const max = Number(st.settings['message.max_length']) || 2000;
    const n = [...input.value].length;
    const hint = $('composer-count');
    hint.dataset.over = String(n > max);
    setText(hint, n > max * 0.8 ? `${n}/${max}` : '');
  }

  function setupLobbyForm() {
    $('lobby-form').addEventListener('submit', (e) => {
      e.preventDefault();
      const lobby = $('lobby-input').value.trim();
      setText($('lobby-error'), '');
      if (!lobbyName.test(lobby)) {
        setText($('lobby-error'), 'A lobby name is 1–64 letters, digits, _, . or -.');
        return;
      }
      if (st.room && lobby === st.room.lobby) return;
      if (!conn.open) {
        setText($('lobby-error'), 'Not connected; try again in a moment.');
        return;
      }
      const from = st.lobby;
      if (st.room) conn.send({type: 'leave', room: st.room.id});
      st.room = null;
      st.ready = false;
      st.lobby = lobby;
      view.reset();
      setText($('room-label'), `${lobby} · joining…`);
      sendControl({type: 'join', lobby}, {kind: 'switch', lobby, from});
      admin.refresh();
    });
  }

  function setupTabs() {
    for (const tab of document.querySelectorAll('.tab')) {
      tab.addEventListener('click', () => select(tab.dataset.tab));
    }
    const tablist = document.querySelector('.tabs');
    tablist.addEventListener('keydown', (e) => {
      if (e.key !== 'ArrowRight' && e.key !== 'ArrowLeft') return;
      const tabs = [...tablist.querySelectorAll('.tab')].filter((t) => t.offsetParent !== null);
      const i = tabs.indexOf(document.activeElement);
      if (i < 0) return;
      const next = tabs[(i + (e.key === 'ArrowRight' ? 1 : tabs.length - 1)) % tabs.length];
      next.focus();
      select(next.dataset.tab);
    });
    function select(name) {
      app.dataset.view = name;
      if (name === 'board' || name === 'admin') app.dataset.side = name;
      for (const t of document.querySelectorAll('.tab')) {
        const wide = window.matchMedia('(min-width: 900px)').matches;
        const on = t.dataset.tab === name || (wide && t.dataset.tab === app.dataset.side && (name === 'chat' || name === 'people'));
        t.setAttribute('aria-selected', String(on));
      }
      if (name === 'admin') admin.refresh();
      if (name === 'board') board.refresh();
      if (name === 'chat') $('composer-input').focus();
    }
    select('chat');
  }

  function sideVisible(name) {
    if (window.matchMedia('(min-width: 900px)').matches) return app.dataset.side === name;
    return app.dataset.view === name;
  }

  function signOut() {
    if (st.room) conn.send({type: 'leave', room: st.room.id});
    // Let the leave go out before the socket closes.
    setTimeout(() => {
      conn.stop();
      board.stop();
      admin.stop();
      session.clear();
      location.reload();
    }, 100);
  }
}

function loadSeen() {
  try {
    const v = JSON.parse(sessionStorage.getItem(NOTICES_SEEN) || '[]');
    return Array.isArray(v) ? v : [];
  } catch {
    return [];
  }
}
