// Direct messages (PROTOCOL.md, "Direct messages"): the list of the user's
// conversations with their unread counts, and one open conversation, live
// over the page's realtime client (dm events reach every connection of
// both users on any node, without a join). A conversation is opened from a
// member of the room or a leaderboard entry; opening it marks it read.

import {api, seg} from './api.js';
import {h, $, avatar, setText, clock} from './dom.js';
import {rich} from './format.js';

const TYPING_EVERY = 2200; // as in a room: the server relays one typing frame a pair every 2 s
const TYPING_SHOWN = 5000;

export class Direct {
  /**
   * @param {{token: string, me: string, rt: any, nextRef: () => string,
   *   show: () => void, visible: () => boolean}} o show brings the panel
   *   up; visible says whether it is on screen.
   */
  constructor({token, me, rt, nextRef, show, visible}) {
    Object.assign(this, {token, me, rt, nextRef, show, visible});
    this.convs = new Map(); // conversation id -> {id, with, unread, last, active}
    this.open = null; // {id, with, msgs: Map id -> message}
    this.pending = new Map(); // ref -> {ref, to, text, state, error}
    this.blocks = new Set(); // canonical (lower-case) names the user blocks
    this.typingUntil = 0;
    this.typingSent = 0;
    this.listSoon = 0;

    rt.on('dm', (m) => this.onDM(m));
    rt.on('dm_sent', (f) => this.onSent(f));
    rt.on('dm_read', (f) => this.onRead(f));
    rt.on('dm_typing', (f) => this.onTyping(f));
    rt.on('dm_removed', (f) => this.onRemoved(f));
    rt.on('dm_gap', () => this.catchUp());
    rt.on('open', () => this.catchUp());
    rt.on('error', ({error}) => this.onError(error));

    $('dm-back').addEventListener('click', () => this.close());
    $('dm-block').addEventListener('click', () => this.toggleBlock());
    $('dm-form').addEventListener('submit', (e) => {
      e.preventDefault();
      const input = $('dm-input');
      const text = input.value.trim();
      if (text === '' || !this.open) return;
      this.send(text);
      input.value = '';
      input.focus();
    });
    $('dm-input').addEventListener('input', () => this.typed());
  }

  start() {
    this.refresh();
    api('GET', '/blocks', {token: this.token}).then((r) => {
      for (const u of r.blocks || []) this.blocks.add(u.toLowerCase());
      this.renderHead();
    }, () => {});
  }

  // shown runs when the panel comes on screen: what is open is read now.
  shown() {
    if (this.open) this.markRead();
    else this.refresh();
  }

  // ---- the list ----

  async refresh() {
    try {
      const r = await api('GET', '/direct?limit=50', {token: this.token});
      this.convs = new Map((r.conversations || []).map((c) => [c.id, c]));
      if (this.open) {
        const c = this.convs.get(this.open.id);
        if (c && c.unread && this.visible()) this.markRead();
      }
      setText($('dm-error'), '');
    } catch (err) {
      setText($('dm-error'), err.message);
    }
    this.renderList();
  }

  // refreshSoon asks for the list once for a burst of events.
  refreshSoon() {
    clearTimeout(this.listSoon);
    this.listSoon = setTimeout(() => this.refresh(), 300);
  }

  renderList() {
    const convs = [...this.convs.values()].sort((a, b) => (b.active || 0) - (a.active || 0));
    $('dm-list').replaceChildren(...convs.map((c) => h('li', {},
      h('button', {
        type: 'button', class: 'dm-conv', 'data-testid': 'dm-conv', 'data-with': c.with,
        'aria-current': this.open && this.open.id === c.id ? 'true' : 'false',
        onclick: () => this.openWith(c.with),
      },
      avatar(c.with),
      h('span', {class: 'dm-conv-main'},
        h('span', {class: 'member-name'}, c.with),
        h('span', {class: 'dm-last muted'}, c.last ? c.last.text : '')),
      c.unread ? h('span', {class: 'badge', 'data-testid': 'dm-unread', 'aria-label': `${c.unread} unread`}, String(c.unread)) : null))));
    const total = convs.reduce((n, c) => n + (c.unread || 0), 0);
    const badge = $('dm-count');
    setText(badge, total ? String(total) : '');
    badge.hidden = total === 0;
  }

  // ---- one conversation ----

  async openWith(user) {
    if (!user || user.toLowerCase() === this.me.toLowerCase()) return;
    this.show();
    setText($('dm-error'), '');
    let id;
    try {
      const r = await api('POST', `/direct/${seg(user)}`, {token: this.token});
      id = r.conversation.id;
      user = r.conversation.with || user;
    } catch (err) {
      this.showError(user, err);
      return;
    }
    if (!this.open || this.open.id !== id) {
      this.open = {id, with: user, msgs: new Map()};
      this.typingUntil = 0;
    }
    $('direct-panel').dataset.conv = 'open';
    this.renderHead();
    this.renderMessages();
    this.renderList();
    try {
      const r = await api('GET', `/direct/${seg(id)}/messages?limit=100`, {token: this.token});
      if (!this.open || this.open.id !== id) return;
      for (const m of r.messages || []) this.open.msgs.set(m.id, m);
      this.renderMessages();
      this.markRead();
    } catch (err) {
      setText($('dm-error'), err.message);
    }
    $('dm-input').focus();
  }

  close() {
    this.open = null;
    $('direct-panel').dataset.conv = '';
    this.renderList();
    const first = document.querySelector('[data-testid="dm-conv"]');
    if (first) first.focus();
  }

  // markRead sends dm_read up to the newest message shown.
  markRead() {
    if (!this.open) return;
    const ids = [...this.open.msgs.keys()].sort();
    const last = ids[ids.length - 1];
    const c = this.convs.get(this.open.id);
    if (c) {
      c.unread = 0;
      this.renderList();
    }
    if (last) this.rt.markDirectRead(this.open.id, last);
  }

  renderHead() {
    const o = this.open;
    setText($('dm-with'), o ? o.with : '');
    const blocked = !!o && this.blocks.has(o.with.toLowerCase());
    const btn = $('dm-block');
    setText(btn, blocked ? 'Unblock' : 'Block');
    btn.setAttribute('aria-pressed', String(blocked));
    btn.dataset.blocked = String(blocked);
  }

  renderMessages() {
    const o = this.open;
    const box = $('dm-messages');
    if (!o) {
      box.replaceChildren();
      return;
    }
    const stick = box.scrollHeight - box.scrollTop - box.clientHeight < 40;
    const msgs = [...o.msgs.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    const mine = [...this.pending.values()].filter((p) => p.to === o.id);
    box.replaceChildren(
      ...msgs.map((m) => this.row(m.from, m.text, {id: m.id, state: 'sent', ts: m.ts})),
      ...mine.map((p) => this.row(this.me, p.text, {state: p.state, error: p.error, ref: p.ref})));
    if (stick || mine.length) box.scrollTop = box.scrollHeight;
    setText($('dm-typing'), this.typingUntil > Date.now() ? `${o.with} is typing…` : '');
  }

  row(from, text, {id, state, ts, error, ref}) {
    return h('div', {class: `dm-msg${from === this.me ? ' mine' : ''}`, 'data-testid': 'dm-message', 'data-id': id, 'data-state': state, 'data-from': from},
      h('span', {class: 'dm-from'}, from),
      ts ? h('time', {class: 'dm-time'}, clock(new Date(ts).toISOString())) : null,
      h('div', {class: 'dm-text', 'data-testid': 'dm-text'}, rich(text)),
      error ? h('p', {class: 'form-error', 'data-testid': 'dm-failed'}, error,
        ' ', h('button', {type: 'button', class: 'ghost', onclick: () => this.discard(ref)}, 'Dismiss')) : null);
  }

  // ---- sending ----

  send(text) {
    const p = {ref: `d${this.nextRef()}`, to: this.open.id, text, state: 'pending', error: ''};
    this.pending.set(p.ref, p);
    if (!this.rt.sendDirect(p.to, p.text, p.ref)) p.state = 'queued'; // goes out on the next open
    this.renderMessages();
  }

  discard(ref) {
    this.pending.delete(ref);
    this.renderMessages();
  }

  typed() {
    if (!this.open || Date.now() - this.typingSent < TYPING_EVERY) return;
    this.typingSent = Date.now();
    this.rt.typingDirect(this.open.id);
  }

  async toggleBlock() {
    const o = this.open;
    if (!o) return;
    const name = o.with.toLowerCase();
    const blocked = this.blocks.has(name);
    try {
      await api(blocked ? 'DELETE' : 'PUT', `/blocks/${seg(o.with)}`, {token: this.token});
      if (blocked) this.blocks.delete(name);
      else this.blocks.add(name);
      setText($('dm-error'), blocked ? '' : `You blocked ${o.with}: neither of you can write here until you unblock.`);
    } catch (err) {
      setText($('dm-error'), err.message);
    }
    this.renderHead();
  }

  // ---- events ----

  onDM(m) {
    if (!m || !m.conversation) return;
    const other = m.from === this.me ? m.to : m.from;
    const c = this.convs.get(m.conversation);
    if (this.open && this.open.id === m.conversation) {
      if (this.open.msgs.has(m.id)) return;
      this.open.msgs.set(m.id, m);
      if (m.from !== this.me) this.typingUntil = 0;
      this.renderMessages();
      if (c) {
        c.last = m;
        c.active = m.ts;
      }
      if (m.from !== this.me && this.visible() && document.visibilityState === 'visible') this.markRead();
      else if (c && m.from !== this.me) c.unread = (c.unread || 0) + 1;
      this.renderList();
      return;
    }
    if (!c) {
      this.refreshSoon(); // a new conversation: the list says its unread count
      return;
    }
    c.last = m;
    c.active = m.ts;
    c.with = c.with || other;
    if (m.from !== this.me) c.unread = (c.unread || 0) + 1;
    this.renderList();
  }

  onSent(f) {
    const p = this.pending.get(f.ref);
    if (!p) return;
    this.pending.delete(f.ref);
    if (this.open && this.open.id === f.conversation && !this.open.msgs.has(f.id)) {
      this.open.msgs.set(f.id, {id: f.id, conversation: f.conversation, from: this.me, to: this.open.with, text: p.text, ts: f.ts});
    }
    this.renderMessages();
  }

  onRead(f) {
    if (f.user && f.user.toLowerCase() !== this.me.toLowerCase()) return;
    const c = this.convs.get(f.conversation);
    if (!c) return;
    c.unread = f.unread || 0;
    this.renderList();
  }

  onTyping(f) {
    if (!this.open || f.conversation !== this.open.id || f.from === this.me) return;
    this.typingUntil = Date.now() + TYPING_SHOWN;
    this.renderMessages();
    setTimeout(() => this.renderMessages(), TYPING_SHOWN + 50);
  }

  onRemoved(f) {
    if (this.open && this.open.id === f.conversation && this.open.msgs.delete(f.id)) this.renderMessages();
  }

  onError(err) {
    const p = err && err.ref ? this.pending.get(err.ref) : null;
    if (!p) return;
    p.state = 'failed';
    p.error = err.code === 'blocked' ? `Not sent (blocked): ${err.message}` : `Not sent: ${err.message}`;
    this.renderMessages();
  }

  showError(user, err) {
    setText($('dm-error'), err.code === 'blocked' ? `You cannot write to ${user} (blocked): ${err.message}` : err.message);
  }

  // catchUp runs after a (re)connect or a gap: the open conversation
  // resumes after its newest message, queued sends go out, the list is
  // asked again.
  catchUp() {
    if (this.open) {
      const ids = [...this.open.msgs.keys()].sort();
      this.rt.resumeDirect(this.open.id, ids[ids.length - 1] || '0-0');
    }
    for (const p of this.pending.values()) {
      if (p.state === 'queued' || p.state === 'pending') {
        if (this.rt.sendDirect(p.to, p.text, p.ref)) p.state = 'pending';
      }
    }
    this.refreshSoon();
  }
}
