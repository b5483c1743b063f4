// The admin console at /admin: sign in once per tab with the admin token
// (or follow the http://host:port/admin#token=… link chatd prints in
// embedded mode), then watch the cluster and act on users, rooms, boards,
// the shop, settings and notices (PROTOCOL.md, the endpoints marked admin).

import {APIError, api, seg, session, userName} from './api.js';
import {h, $, ago, clock, setText} from './dom.js';

const STATS_EVERY = 2000; // the dashboard polls /stats this often
const CHART_POINTS = 60; // two minutes of samples
const STALE_AFTER = 15000; // a node whose heartbeat is older is unhealthy
const VIEWER = 'chatd.admin.viewer';
const READ_MODES = 'chatd.admin.reads'; // path kind -> 'viewer'

const st = {
  token: '',
  role: 'admin', // or 'read': the read-only admin token (every action off)
  // The read endpoints are "user" endpoints; a server that does not let
  // the admin token read them answers 401, and the console then reads them
  // with a guest session of its own (viewer), made once per tab.
  viewer: sessionStorage.getItem(VIEWER) || '',
  section: 'dash',
  samples: [], // {t, rate, online}
  lastStats: null, // {t, messages}
  statsTimer: 0,
  defs: [],
  fields: new Map(),
};

boot();

function boot() {
  // The sign-in link carries the token in the fragment (never sent to a
  // server, never in a log): take it and take it out of the address bar.
  takeLinkToken();
  const tok = session.adminToken();
  $('admin-signin-form').addEventListener('submit', (e) => {
    e.preventDefault();
    signIn($('admin-token').value.trim());
  });
  // The link followed in a tab that shows the sign-in already.
  window.addEventListener('hashchange', () => {
    if (takeLinkToken() && !st.token) signIn(session.adminToken());
  });
  if (tok) signIn(tok);
  else showSignIn('');
}

function takeLinkToken() {
  const m = /^#token=(.+)$/.exec(location.hash);
  if (!m) return false;
  session.setAdminToken(decodeURIComponent(m[1]));
  history.replaceState(null, '', location.pathname + location.search);
  return true;
}

function showSignIn(message) {
  $('console').hidden = true;
  $('admin-signin').hidden = false;
  setText($('admin-signin-error'), message);
  $('admin-token').focus();
}

async function signIn(token) {
  if (!token) {
    showSignIn('Enter the admin token.');
    return;
  }
  st.token = token;
  try {
    // An admin-only read: a wrong token is 401, no admin token on the
    // server is 403.
    await call('GET', '/moderation');
  } catch (err) {
    session.setAdminToken('');
    st.token = '';
    showSignIn(err.status === 401 ? 'That is not the admin token of this server.' : err.message);
    return;
  }
  session.setAdminToken(token);
  try {
    st.role = (await call('GET', '/admin/whoami')).role || 'admin';
  } catch {
    st.role = 'admin'; // a node without the endpoint: the actions answer for themselves
  }
  $('admin-token').value = '';
  $('admin-signin').hidden = true;
  $('console').hidden = false;
  startConsole();
}

// call sends an API request as the admin. Some reads are "user"
// endpoints, which a server may keep the admin token out of (401): the
// console then makes that kind of read (by the path's first segment) with
// a guest session of its own (viewer), and remembers so for the tab. A
// read the viewer may not make (403, admin only) goes back to the admin
// token.
async function call(method, path, body) {
  const reads = method === 'GET' || path.endsWith('/ranks');
  if (!reads) return api(method, path, {token: st.token, body});
  const kind = path.split(/[/?]/)[1];
  const modes = readModes();
  if (modes[kind] !== 'viewer') {
    try {
      return await api(method, path, {token: st.token, body});
    } catch (err) {
      if (err.status !== 401) throw err;
      modes[kind] = 'viewer';
      sessionStorage.setItem(READ_MODES, JSON.stringify(modes));
    }
  }
  try {
    return await api(method, path, {token: await viewer(), body});
  } catch (err) {
    if (err.status !== 403 || err.code === 'banned') throw err;
    delete modes[kind];
    sessionStorage.setItem(READ_MODES, JSON.stringify(modes));
    return api(method, path, {token: st.token, body});
  }
}

function readModes() {
  try {
    return JSON.parse(sessionStorage.getItem(READ_MODES) || '{}') || {};
  } catch {
    return {};
  }
}

async function viewer() {
  if (st.viewer) return st.viewer;
  const name = `console-${Math.random().toString(36).slice(2, 10)}`;
  try {
    const res = await api('POST', '/session', {body: {user: name}});
    st.viewer = res.token;
    sessionStorage.setItem(VIEWER, st.viewer);
    return st.viewer;
  } catch (err) {
    throw new APIError(err.status, err.code, `this server lets the admin token make admin calls only, and reading needs a session: ${err.message}`);
  }
}

// applyRole turns every action control ([data-act]) off under the
// read-only token — the ones rendered later too — and says why.
function applyRole() {
  const ro = st.role === 'read';
  document.body.dataset.role = st.role;
  $('readonly-banner').hidden = !ro;
  if (!ro) return;
  const off = () => {
    for (const el of document.querySelectorAll('[data-act]:not([disabled])')) {
      el.disabled = true;
      el.title = 'The read-only admin token takes no action';
    }
  };
  off();
  new MutationObserver(off).observe($('console'), {childList: true, subtree: true});
}

function startConsole() {
  applyRole();
  setupTabs();
  $('admin-signout').addEventListener('click', () => {
    session.setAdminToken('');
    sessionStorage.removeItem(VIEWER);
    sessionStorage.removeItem(READ_MODES);
    location.replace('/admin');
  });
  setupUsers();
  setupSearch();
  setupRooms();
  setupAudit();
  setupBoards();
  setupShop();
  setupNotices();
  loadSettings();
  const section = /^#(\w+)$/.exec(location.hash);
  select(section && $(`sec-${section[1]}`) ? section[1] : 'dash');
  pollStats();
  window.addEventListener('resize', drawChart);
  window.matchMedia('(prefers-color-scheme: dark)').addEventListener('change', drawChart);
}

function consoleError(err) {
  const el = $('console-error');
  setText(el, err ? err.message || String(err) : '');
  el.hidden = !err;
}

// ---- sections ----

function setupTabs() {
  const tabs = [...document.querySelectorAll('.tab')];
  for (const t of tabs) t.addEventListener('click', () => select(t.dataset.sec));
  document.querySelector('.tablist').addEventListener('keydown', (e) => {
    if (e.key !== 'ArrowRight' && e.key !== 'ArrowLeft') return;
    const i = tabs.indexOf(document.activeElement);
    if (i < 0) return;
    const next = tabs[(i + (e.key === 'ArrowRight' ? 1 : tabs.length - 1)) % tabs.length];
    next.focus();
    select(next.dataset.sec);
  });
}

function select(sec) {
  st.section = sec;
  for (const t of document.querySelectorAll('.tab')) {
    const on = t.dataset.sec === sec;
    t.setAttribute('aria-selected', String(on));
    t.tabIndex = on ? 0 : -1;
  }
  for (const s of document.querySelectorAll('.sec')) s.hidden = s.id !== `sec-${sec}`;
  history.replaceState(null, '', `#${sec}`);
  consoleError(null);
  if (sec === 'dash') drawChart();
  if (sec === 'nodes') loadNodes();
  if (sec === 'users') loadModeration();
  if (sec === 'rooms') {
    loadLobbies();
    loadPopulation();
  }
  if (sec === 'shop') loadItems();
  if (sec === 'audit') loadAudit();
}

// ---- dashboard ----

async function pollStats() {
  clearTimeout(st.statsTimer);
  if (document.visibilityState === 'visible' && st.section === 'dash') {
    await Promise.all([loadStats(), loadNodes(), loadQueues(), loadHealth()]);
  } else if (document.visibilityState === 'visible' && st.section === 'nodes') {
    await Promise.all([loadNodes(), loadHealth()]);
  } else {
    await loadHealth();
  }
  st.statsTimer = setTimeout(pollStats, STATS_EVERY);
}

async function loadStats() {
  try {
    const s = await call('GET', '/stats');
    const now = performance.now();
    let rate = 0;
    if (st.lastStats && now > st.lastStats.t) {
      rate = Math.max(0, (s.messages_total - st.lastStats.messages) / ((now - st.lastStats.t) / 1000));
    }
    st.lastStats = {t: now, messages: s.messages_total};
    st.samples.push({t: Date.now(), rate, online: s.online});
    if (st.samples.length > CHART_POINTS) st.samples.shift();
    setText($('st-online'), fmtInt(s.online));
    setText($('st-rooms'), fmtInt(s.rooms_total));
    setText($('st-messages'), fmtInt(s.messages_total));
    setText($('st-rate'), st.samples.length > 1 ? rate.toFixed(rate < 10 ? 1 : 0) : '…');
    setText($('st-nodes'), fmtInt(s.nodes));
    drawChart();
  } catch (err) {
    consoleError(err);
  }
}

async function loadNodes() {
  try {
    const r = await call('GET', '/nodes');
    const now = Date.now();
    $('nodes-body').replaceChildren(...(r.nodes || []).map((n) => {
      const age = now - new Date(n.last_heartbeat).getTime();
      const ok = age < STALE_AFTER;
      return h('tr', {'data-testid': 'node-row', 'data-node': n.id},
        h('td', {class: 'id'}, n.id),
        h('td', {class: 'id', 'data-testid': 'node-version'}, n.version || '—'),
        h('td', {class: 'num', 'data-testid': 'node-uptime'}, n.started_at ? fmtDuration(n.uptime_seconds) : '—'),
        h('td', {class: 'num', 'data-testid': 'node-cpu'}, typeof n.cpu === 'number' ? n.cpu.toFixed(2) : '—'),
        h('td', {class: 'num', 'data-testid': 'node-memory'}, fmtBytes(n.memory_bytes)),
        h('td', {class: 'num', 'data-testid': 'node-heap'}, fmtBytes(n.heap_bytes)),
        h('td', {class: 'num', 'data-testid': 'node-goroutines'}, fmtInt(n.goroutines)),
        h('td', {class: 'num', 'data-testid': 'node-connections'}, fmtInt(n.connections)),
        h('td', {class: 'id'}, n.addr || '—'),
        h('td', {class: 'nowrap'}, ago(n.last_heartbeat)),
        h('td', {}, h('span', {class: ok ? 'ok-tag' : 'bad-tag'}, ok ? 'healthy' : 'no heartbeat')));
    }));
  } catch (err) {
    consoleError(err);
  }
}

// loadQueues shows each matchmaking queue's depth and oldest wait.
async function loadQueues() {
  try {
    const r = await call('GET', '/matchmaking/queues');
    $('queues-body').replaceChildren(...(r.queues || []).map((q) => h('tr', {'data-testid': 'queue-row', 'data-queue': q.queue},
      h('td', {}, q.queue),
      h('td', {class: 'num'}, q.min === q.max ? String(q.min) : `${q.min}–${q.max}`),
      h('td', {class: 'num', 'data-testid': 'queue-tickets'}, fmtInt(q.tickets)),
      h('td', {class: 'num', 'data-testid': 'queue-oldest'}, q.tickets ? `${Math.round(q.oldest_wait_seconds)} s` : '—'))));
  } catch (err) {
    consoleError(err);
  }
}

// loadHealth asks this node's /readyz: Redis answers and pub/sub receives.
async function loadHealth() {
  const el = $('health');
  let state = 'ok';
  let text = 'Redis ok';
  try {
    const res = await fetch('/readyz', {cache: 'no-store'});
    const body = await res.json().catch(() => null);
    if (!res.ok) {
      state = 'bad';
      text = (body && body.error && body.error.message) || `not ready (${res.status})`;
    } else if (body && body.node) {
      text = `Redis ok · via ${body.node}`;
    }
  } catch {
    state = 'bad';
    text = 'this node cannot be reached';
  }
  el.dataset.state = state;
  setText(el, text);
  setText($('st-redis'), state === 'ok' ? 'ok' : text);
  $('st-redis').dataset.state = state;
}

function drawChart() {
  const c = $('chart');
  if (!c || c.offsetParent === null) return;
  const dpr = window.devicePixelRatio || 1;
  const w = c.clientWidth;
  const hgt = c.clientHeight;
  if (c.width !== Math.round(w * dpr) || c.height !== Math.round(hgt * dpr)) {
    c.width = Math.round(w * dpr);
    c.height = Math.round(hgt * dpr);
  }
  const g = c.getContext('2d');
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  g.clearRect(0, 0, w, hgt);
  const css = getComputedStyle(document.documentElement);
  const color = (v) => css.getPropertyValue(v).trim();
  const pad = {l: 34, r: 34, t: 8, b: 18};
  const iw = w - pad.l - pad.r;
  const ih = hgt - pad.t - pad.b;
  g.font = `11px ${color('--font') || 'sans-serif'}`;
  g.strokeStyle = color('--border');
  g.fillStyle = color('--muted');
  g.lineWidth = 1;
  for (let i = 0; i <= 4; i++) {
    const y = pad.t + (ih * i) / 4 + 0.5;
    g.beginPath();
    g.moveTo(pad.l, y);
    g.lineTo(pad.l + iw, y);
    g.stroke();
  }
  g.fillText('−2 min', pad.l, hgt - 4);
  g.textAlign = 'right';
  g.fillText('now', pad.l + iw, hgt - 4);
  const s = st.samples;
  const series = [
    {key: 'rate', color: color('--accent'), side: 'left'},
    {key: 'online', color: color('--ok'), side: 'right'},
  ];
  for (const ser of series) {
    const max = niceMax(Math.max(1, ...s.map((p) => p[ser.key])));
    g.fillStyle = ser.color;
    g.textAlign = ser.side === 'left' ? 'right' : 'left';
    g.fillText(String(max), ser.side === 'left' ? pad.l - 4 : pad.l + iw + 4, pad.t + 9);
    g.fillText('0', ser.side === 'left' ? pad.l - 4 : pad.l + iw + 4, pad.t + ih);
    if (s.length < 2) continue;
    g.strokeStyle = ser.color;
    g.lineWidth = 2;
    g.beginPath();
    s.forEach((p, i) => {
      const x = pad.l + iw - ((s.length - 1 - i) * iw) / (CHART_POINTS - 1);
      const y = pad.t + ih - (p[ser.key] / max) * ih;
      if (i === 0) g.moveTo(x, y);
      else g.lineTo(x, y);
    });
    g.stroke();
  }
  const last = s[s.length - 1];
  if (last) c.setAttribute('aria-label', `Chart: now ${last.rate.toFixed(1)} messages per second and ${last.online} users online; two minutes of history`);
}

function niceMax(v) {
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

// ---- users ----

function setupUsers() {
  $('lookup-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    const user = $('lookup-user').value.trim();
    const out = $('lookup-result');
    setText($('lookup-error'), '');
    if (!userName.test(user)) {
      setText($('lookup-error'), 'A user name is 1–32 letters, digits, _ or -.');
      return;
    }
    try {
      const p = await call('GET', `/presence/${seg(user)}`);
      const rows = [
        ['Status', p.online ? 'online' : 'offline'],
        ['Node', p.node || '—'],
        ['Rooms', (p.rooms || []).join(', ') || '—'],
        ['Last seen', p.last_seen ? `${ago(p.last_seen)}` : p.online ? 'now' : 'never'],
      ];
      out.replaceChildren(...rows.flatMap(([k, v]) => [h('dt', {}, k), h('dd', {'data-testid': `lookup-${k.toLowerCase().replace(' ', '-')}`}, v)]));
      out.hidden = false;
      $('mod-user').value = user;
    } catch (err) {
      out.hidden = true;
      setText($('lookup-error'), err.message);
    }
  });
  const duration = () => $('mod-duration');
  for (const r of document.querySelectorAll('input[name="mod-action"]')) {
    r.addEventListener('change', () => { duration().disabled = actionOf() === 'kick'; });
  }
  duration().disabled = true;
  $('mod-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    const user = $('mod-user').value.trim();
    const action = actionOf();
    setText($('mod-error'), '');
    setText($('mod-result'), '');
    if (!userName.test(user)) {
      setText($('mod-error'), 'A user name is 1–32 letters, digits, _ or -.');
      $('mod-user').focus();
      return;
    }
    const body = {user, reason: $('mod-reason').value.trim()};
    if (action !== 'kick') body.seconds = Number(duration().value);
    try {
      const r = await call('POST', `/moderation/${action}`, body);
      const done = {kick: 'Kicked', mute: 'Muted', ban: 'Banned'}[action];
      setText($('mod-result'), r.until ? `${done} ${user} until ${new Date(r.until).toLocaleString()}.` : `${done} ${user}.`);
      loadModeration();
    } catch (err) {
      setText($('mod-error'), err.message);
    }
  });
  $('mod-refresh').addEventListener('click', loadModeration);
}

function actionOf() {
  return document.querySelector('input[name="mod-action"]:checked').value;
}

async function loadModeration() {
  try {
    const r = await call('GET', '/moderation');
    fillMod($('mutes-body'), r.mutes || [], 'mute');
    fillMod($('bans-body'), r.bans || [], 'ban');
  } catch (err) {
    consoleError(err);
  }
}

function fillMod(body, entries, kind) {
  body.replaceChildren(...entries.map((e) => h('tr', {'data-testid': `${kind}-row`, 'data-user': e.user},
    h('td', {}, e.user),
    h('td', {}, new Date(e.until).toLocaleString()),
    h('td', {}, e.reason || '—'),
    h('td', {}, h('button', {
      type: 'button', class: 'small-btn', 'data-testid': `lift-${kind}`, 'data-act': true,
      'aria-label': `Lift the ${kind} of ${e.user}`,
      onclick: async () => {
        try {
          await call('DELETE', `/moderation/${kind}/${seg(e.user)}`);
          loadModeration();
        } catch (err) {
          consoleError(err);
        }
      },
    }, 'Lift')))));
}

// ---- rooms ----

function setupRooms() {
  $('room-form').addEventListener('submit', (e) => {
    e.preventDefault();
    openRoom($('room-id').value.trim());
  });
  $('rooms-refresh').addEventListener('click', loadPopulation);
  $('say-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    const room = st.room;
    const text = $('say-text').value.trim();
    setText($('say-error'), '');
    setText($('say-result'), '');
    if (!text) {
      setText($('say-error'), 'Write the message first.');
      return;
    }
    try {
      const r = await call('POST', `/admin/rooms/${seg(room)}/messages`, {text});
      $('say-text').value = '';
      setText($('say-result'), `Sent to ${room} as the system at ${clock(r.message.ts)}.`);
      openRoom(room);
    } catch (err) {
      setText($('say-error'), err.message);
    }
  });
}

// loadPopulation lists the rooms with the most members first.
async function loadPopulation() {
  try {
    const r = await call('GET', '/admin/rooms?limit=50');
    $('pop-body').replaceChildren(...(r.rooms || []).map((room) => h('tr', {'data-testid': 'pop-row', 'data-room': room.id},
      h('td', {}, h('button', {type: 'button', class: 'link-btn', 'data-testid': 'pop-open', onclick: () => openRoom(room.id)}, room.id)),
      h('td', {class: 'num', 'data-testid': 'pop-members'}, fmtInt((room.members || []).length)),
      h('td', {class: 'num'}, fmtInt(room.capacity)))));
  } catch (err) {
    consoleError(err);
  }
}

// disconnect closes a user's connections on every node, or one of them.
async function disconnect(user, conn, done) {
  try {
    await call('POST', '/admin/disconnect', conn ? {user, node: conn.node, connection: conn.id} : {user});
    done(conn ? `Disconnected one connection of ${user} on ${conn.node}.` : `Disconnected ${user} on every node.`);
  } catch (err) {
    consoleError(err);
  }
}

async function loadLobbies() {
  try {
    const r = await call('GET', '/lobbies?limit=20');
    $('admin-lobbies').replaceChildren(...(r.lobbies || []).map((l) => h('li', {},
      h('button', {type: 'button', class: 'pick', 'data-testid': 'admin-lobby', onclick: () => loadRooms(l.lobby)},
        h('span', {}, l.lobby), h('span', {class: 'muted'}, `${l.online} online · ${l.rooms} room${l.rooms === 1 ? '' : 's'}`)))));
  } catch (err) {
    consoleError(err);
  }
}

async function loadRooms(lobby) {
  try {
    const r = await call('GET', `/lobbies/${seg(lobby)}/rooms`);
    $('lobby-rooms').replaceChildren(...(r.rooms || []).map((room) => h('button', {
      type: 'button', class: 'pick', 'data-testid': 'admin-room', onclick: () => openRoom(room.id),
    }, `${room.id} · ${(room.members || []).length}/${room.capacity}`)));
  } catch (err) {
    consoleError(err);
  }
}

async function openRoom(id) {
  setText($('room-error'), '');
  if (!/^[A-Za-z0-9_.-]{1,64}-\d+$/.test(id)) {
    setText($('room-error'), 'A room id is a lobby name, a dash and a number, like general-1.');
    return;
  }
  $('room-id').value = id;
  try {
    const r = await call('GET', `/admin/rooms/${seg(id)}?limit=50`);
    const room = r.room;
    st.room = room.id;
    setText($('room-title'), `${room.id} · ${(room.members || []).length}/${room.capacity} seats`);
    setText($('room-members'), (room.members || []).length ? `Members: ${room.members.join(', ')}` : 'Nobody is seated.');
    $('room-presence-body').replaceChildren(...(r.members || []).map((p) => h('tr', {'data-testid': 'member-row', 'data-user': p.user},
      h('td', {}, p.user),
      h('td', {'data-testid': 'member-status'}, p.online ? 'online' : 'offline'),
      h('td', {class: 'id'}, p.node || '—'),
      h('td', {}, h('button', {
        type: 'button', class: 'small-btn danger', 'data-testid': 'member-disconnect', 'data-act': true,
        'aria-label': `Disconnect ${p.user} on every node`,
        onclick: () => disconnect(p.user, null, (msg) => setText($('say-result'), msg)),
      }, 'Disconnect')))));
    renderRoomMessages(id, r.messages || []);
    $('room-view').hidden = false;
  } catch (err) {
    $('room-view').hidden = true;
    setText($('room-error'), err.message);
  }
}

// ---- user search ----

function setupSearch() {
  $('search-form').addEventListener('submit', (e) => {
    e.preventDefault();
    search();
  });
}

async function search() {
  const prefix = $('search-prefix').value.trim();
  setText($('search-error'), '');
  setText($('search-result'), '');
  if (!userName.test(prefix)) {
    setText($('search-error'), 'Type the start of a name: letters, digits, _ or -.');
    return;
  }
  try {
    const [r, mods] = await Promise.all([
      call('GET', `/admin/users?prefix=${encodeURIComponent(prefix)}&limit=50`),
      call('GET', '/moderation'),
    ]);
    const users = r.users || [];
    const muted = new Map((mods.mutes || []).map((m) => [m.user.toLowerCase(), m]));
    setText($('search-result'), `${users.length} online user${users.length === 1 ? '' : 's'} whose name starts with ${prefix}.`);
    const done = (msg) => {
      setText($('search-result'), msg);
      setTimeout(search, 1500); // presence follows within a few seconds
    };
    $('users-body').replaceChildren(...users.map((u) => h('tr', {'data-testid': 'user-row', 'data-user': u.user},
      h('td', {}, u.user),
      h('td', {class: 'id'}, u.node || '—'),
      h('td', {}, (u.rooms || []).join(', ') || '—'),
      h('td', {class: 'id', 'data-testid': 'user-sessions'}, String((u.sessions || []).length)),
      h('td', {}, h('ul', {class: 'conn-list'}, (u.connections || []).map((c) => h('li', {'data-testid': 'user-conn', 'data-conn': c.id, 'data-node': c.node},
        h('span', {class: 'id'}, `${c.node} · ${c.id}`),
        h('button', {
          type: 'button', class: 'small-btn danger', 'data-testid': 'conn-disconnect', 'data-act': true,
          'aria-label': `Disconnect connection ${c.id} of ${u.user} on ${c.node}`,
          onclick: () => disconnect(u.user, c, done),
        }, 'Disconnect'))))),
      h('td', {}, h('div', {class: 'row-actions'},
        h('button', {
          type: 'button', class: 'small-btn danger', 'data-testid': 'user-disconnect', 'data-act': true,
          'aria-label': `Disconnect all connections of ${u.user}, on every node`,
          onclick: () => disconnect(u.user, null, done),
        }, 'Disconnect all'),
        muted.has(u.user.toLowerCase()) && h('button', {
          type: 'button', class: 'small-btn', 'data-testid': 'user-unmute', 'data-act': true,
          title: `Muted until ${new Date(muted.get(u.user.toLowerCase()).until).toLocaleString()}`,
          'aria-label': `Clear mute of ${u.user}`,
          onclick: async () => {
            try {
              await call('DELETE', `/moderation/mute/${seg(u.user)}`);
              done(`Cleared the mute of ${u.user}.`);
            } catch (err) {
              consoleError(err);
            }
          },
        }, 'Clear mute'))))));
  } catch (err) {
    setText($('search-error'), err.message);
  }
}

// ---- audit log ----

function setupAudit() {
  $('audit-refresh').addEventListener('click', loadAudit);
}

async function loadAudit() {
  try {
    const r = await call('GET', '/admin/audit?limit=200');
    $('audit-body').replaceChildren(...(r.entries || []).map((e) => h('tr', {'data-testid': 'audit-row', 'data-role': e.role},
      h('td', {class: 'nowrap'}, new Date(e.at).toLocaleString()),
      h('td', {class: 'id', 'data-testid': 'audit-actor'}, e.actor),
      h('td', {class: 'id', 'data-testid': 'audit-action'}, e.action),
      h('td', {'data-testid': 'audit-target'}, e.target || '—'),
      h('td', {class: 'num', 'data-testid': 'audit-status'}, String(e.status)),
      h('td', {class: 'id'}, e.node))));
  } catch (err) {
    consoleError(err);
  }
}

function renderRoomMessages(room, messages) {
  const list = $('room-messages');
  list.replaceChildren(...messages.slice().reverse().map((msg) => {
    const li = h('li', {class: 'admin-msg', 'data-testid': 'admin-message', 'data-id': msg.id},
      h('span', {class: 'msg-time'}, clock(msg.ts)),
      h('span', {class: 'msg-from'}, msg.from),
      h('span', {class: 'admin-msg-text'}, msg.text),
      h('button', {
        type: 'button', class: 'small-btn danger', 'data-testid': 'remove-message', 'data-act': true,
        'aria-label': `Remove the message of ${msg.from} at ${clock(msg.ts)}`,
        onclick: async () => {
          try {
            await call('DELETE', `/rooms/${seg(room)}/messages/${seg(msg.id)}`);
            li.remove();
          } catch (err) {
            setText($('room-error'), err.message);
          }
        },
      }, 'Remove'));
    return li;
  }));
  if (!messages.length) list.replaceChildren(h('li', {class: 'muted'}, 'No messages in history.'));
}

// ---- leaderboards ----

function setupBoards() {
  $('board-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    const board = $('board-name').value.trim();
    const player = $('board-player').value.trim();
    setText($('board-error'), '');
    try {
      let entries;
      if (player) {
        const r = await call('POST', `/leaderboards/${seg(board)}/ranks`, {players: [player]});
        if (!r.entries[0] || r.entries[0].rank < 0) {
          setText($('board-error'), `${player} has no score on ${board}.`);
          entries = [];
        } else {
          entries = (await call('GET', `/leaderboards/${seg(board)}/around/${seg(player)}?radius=5`)).entries;
        }
        setText($('board-list-title'), `Around ${player}`);
      } else {
        entries = (await call('GET', `/leaderboards/${seg(board)}/top?limit=20`)).entries;
        setText($('board-list-title'), 'Top 20');
      }
      $('board-entries').replaceChildren(...(entries || []).map((x) => h('li', {
        'data-testid': 'board-entry', 'data-player': x.player, class: x.player === player ? 'me-row' : null,
      },
      h('span', {class: 'rank'}, `#${x.rank + 1}`),
      h('span', {class: 'player'}, x.player),
      h('span', {class: 'score'}, String(x.score)))));
    } catch (err) {
      setText($('board-error'), err.message);
    }
  });
}

// ---- shop ----

function setupShop() {
  $('stock-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    setText($('stock-error'), '');
    setText($('stock-result'), '');
    const item = $('stock-item').value.trim();
    const stock = intOf($('stock-count').value);
    const price = intOf($('stock-price').value);
    if (stock === null || price === null) {
      setText($('stock-error'), 'Stock and price are whole numbers.');
      return;
    }
    try {
      await call('POST', '/shop/items', {item, stock, price});
      setText($('stock-result'), `${item}: ${stock} in stock at ${price} coins.`);
      loadItems();
    } catch (err) {
      setText($('stock-error'), err.message);
    }
  });
  $('grant-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    setText($('grant-error'), '');
    setText($('grant-result'), '');
    const user = $('grant-user').value.trim();
    const amount = intOf($('grant-amount').value);
    if (amount === null) {
      setText($('grant-error'), 'Coins are a whole number.');
      return;
    }
    try {
      const r = await call('POST', '/wallet/grant', {user, amount});
      setText($('grant-result'), `Granted ${amount} coins to ${user}; balance ${fmtInt(r.balance)}.`);
    } catch (err) {
      setText($('grant-error'), err.message);
    }
  });
}

async function loadItems() {
  try {
    const r = await call('GET', '/shop/items');
    $('items-body').replaceChildren(...(r.items || []).map((i) => h('tr', {'data-testid': 'item-row', 'data-item': i.item},
      h('td', {}, i.item), h('td', {class: 'num'}, fmtInt(i.stock)), h('td', {class: 'num'}, fmtInt(i.price)))));
  } catch (err) {
    consoleError(err);
  }
}

// ---- settings ----

async function loadSettings() {
  try {
    const [defs, vals] = await Promise.all([call('GET', '/settings/defs'), call('GET', '/settings')]);
    st.defs = defs.settings || [];
    renderSettings(vals.values || {});
  } catch (err) {
    setText($('settings-list'), `The settings could not be read: ${err.message}`);
  }
}

function renderSettings(values) {
  const list = $('settings-list');
  st.fields.clear();
  list.replaceChildren(...st.defs.map((d) => {
    const id = `setting-${d.key.replace(/[^A-Za-z0-9_-]/g, '-')}`;
    const numeric = d.type === 'int' || d.type === 'number';
    const input = numeric
      ? h('input', {
        id, type: 'number', inputmode: d.type === 'int' ? 'numeric' : 'decimal',
        step: d.type === 'int' ? '1' : 'any',
        'data-testid': `setting-${d.key}`, 'aria-describedby': `${id}-desc ${id}-err`,
      })
      : h('textarea', {
        id, rows: 2,
        'data-testid': `setting-${d.key}`, 'aria-describedby': `${id}-desc ${id}-err`,
      });
    input.value = toInput(values[d.key]);
    input.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && (numeric || e.ctrlKey || e.metaKey)) {
        e.preventDefault();
        save(d.key, 'PUT');
      }
    });
    const error = h('p', {id: `${id}-err`, class: 'form-error', role: 'alert', 'data-testid': `setting-error-${d.key}`});
    const ok = h('p', {class: 'form-result', role: 'status', 'data-testid': `setting-ok-${d.key}`});
    st.fields.set(d.key, {input, error, ok, def: d});
    return h('div', {class: 'setting', 'data-key': d.key},
      h('label', {for: id}, d.key),
      h('p', {class: 'desc', id: `${id}-desc`}, `${d.description} (${describe(d)})`),
      h('div', {class: 'row'},
        input,
        h('button', {type: 'button', 'data-testid': `setting-save-${d.key}`, 'data-act': true, onclick: () => save(d.key, 'PUT')}, 'Save'),
        h('button', {type: 'button', class: 'ghost', 'data-testid': `setting-reset-${d.key}`, 'data-act': true,
          'aria-label': `Reset ${d.key} to its default`, onclick: () => save(d.key, 'DELETE')}, 'Reset')),
      error, ok);
  }));
}

// save sends what was typed; the server validates and its message says
// what it expects. A numeric field sends a number when it reads as one.
async function save(key, method) {
  const f = st.fields.get(key);
  setText(f.error, '');
  setText(f.ok, '');
  f.input.removeAttribute('aria-invalid');
  let body;
  if (method === 'PUT') {
    const raw = f.input.value;
    let value = raw;
    if (f.def.type !== 'string') {
      const n = Number(raw);
      value = raw.trim() !== '' && Number.isFinite(n) ? n : raw;
    }
    body = {value};
  }
  try {
    const r = await call(method, `/settings/${seg(key)}`, body);
    if (method === 'DELETE') f.input.value = toInput(f.def.default);
    setText(f.ok, method === 'DELETE' ? `Back to the default (version ${r.version}).` : `Saved (version ${r.version}).`);
    setTimeout(() => setText(f.ok, ''), 4000);
  } catch (err) {
    f.input.setAttribute('aria-invalid', 'true');
    setText(f.error, err.message);
  }
}

function describe(d) {
  if (d.type === 'string') return `text, at most ${d.max} characters, default ${JSON.stringify(d.default ?? '')}`;
  const lo = d.min_exclusive ? `more than ${d.min}` : `at least ${d.min}`;
  return `${d.type === 'int' ? 'a whole number' : 'a number'} ${lo} and at most ${d.max}, default ${d.default}`;
}

// ---- notices ----

function setupNotices() {
  $('notice-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    const input = $('notice-text');
    const text = input.value.trim();
    setText($('notice-result'), '');
    setText($('notice-error'), '');
    if (!text) {
      setText($('notice-error'), 'Write the notice first.');
      input.focus();
      return;
    }
    try {
      const r = await call('POST', '/notices', {text});
      input.value = '';
      setText($('notice-result'), `Posted to everyone (id ${r.id}).`);
    } catch (err) {
      setText($('notice-error'), err.message);
    }
  });
}

// ---- helpers ----

function intOf(s) {
  const n = Number(s);
  return s.trim() !== '' && Number.isInteger(n) ? n : null;
}

function fmtInt(n) {
  return typeof n === 'number' ? n.toLocaleString() : '—';
}

function fmtBytes(n) {
  if (typeof n !== 'number' || n <= 0) return '—';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return `${n.toFixed(n < 10 && i > 0 ? 1 : 0)} ${units[i]}`;
}

function fmtDuration(sec) {
  const s = Math.max(0, Math.floor(sec || 0));
  const d = Math.floor(s / 86400);
  const hh = Math.floor((s % 86400) / 3600);
  const mm = Math.floor((s % 3600) / 60);
  if (d) return `${d}d ${hh}h`;
  if (hh) return `${hh}h ${mm}m`;
  if (mm) return `${mm}m ${s % 60}s`;
  return `${s}s`;
}

function toInput(v) {
  return v === undefined || v === null ? '' : String(v);
}
