// The message list of the current room: messages once each, in id order
// (ids of one room sort in send order as strings), consecutive messages of
// one sender grouped under one name, and the caller's own messages pending
// until their ack.

import {h, $, avatar, clock, setText} from './dom.js';
import {rich} from './format.js';

const MAX_SHOWN = 500; // confirmed messages kept in the view
const GROUP_MS = 5 * 60 * 1000; // a sender's messages this close share a head

const STATE_TEXT = {
  queued: 'waiting for the connection…',
  pending: 'sending…',
};

export class ChatView {
  constructor(me) {
    this.me = me;
    this.list = $('messages');
    this.jump = $('jump');
    this.ids = new Set(); // message ids shown, for dedupe
    this.lastId = ''; // greatest id received in a message frame: where a resume starts
    this.pending = new Map(); // ref -> {ref, room, text, el, state, gen, id}, in send order
    this.onBottom = () => {}; // the list was scrolled to its end
    this.list.addEventListener('scroll', () => {
      if (this.nearBottom()) {
        this.jump.hidden = true;
        this.onBottom();
      }
    });
    this.jump.addEventListener('click', () => this.scrollDown());
  }

  /** reset empties the view for a new room (pending messages go too). */
  reset() {
    this.ids.clear();
    this.lastId = '';
    this.pending.clear();
    this.list.replaceChildren();
    this.jump.hidden = true;
  }

  /**
   * gap empties the confirmed messages after a resume_gap: the history that
   * follows is the latest. Pending messages stay.
   */
  gap() {
    this.ids.clear();
    this.lastId = '';
    for (const el of [...this.list.children]) {
      if (el.dataset.id) el.remove();
    }
    for (const p of this.pending.values()) if (p.id) this.ids.add(p.id);
    this.regroupAll();
  }

  /**
   * add shows a message frame's message, unless it is already shown; it
   * returns true for a message that is new to the view.
   */
  add(m) {
    if (!m || typeof m.id !== 'string' || this.ids.has(m.id)) return false;
    if (m.id > this.lastId) this.lastId = m.id;
    this.ids.add(m.id);
    if (m.from === this.me) {
      // Our own message, before (or instead of) its ack: the oldest
      // unconfirmed pending message with this text is it.
      for (const p of this.pending.values()) {
        if (!p.id && p.text === m.text && p.state !== 'error') {
          this.confirm(p, m.id, m.ts);
          return true;
        }
      }
    }
    this.place(this.render(m, 'sent'), m.id);
    return true;
  }

  /** remove takes a removed message out of the view. */
  remove(id) {
    const el = this.list.querySelector(`[data-id="${CSS.escape(id)}"]`);
    if (!el) return;
    const next = el.nextElementSibling;
    el.remove();
    if (next) this.regroup(next);
  }

  /** addPending shows a message of ours that is not confirmed yet. */
  addPending(p) {
    p.el = this.render({from: this.me, text: p.text, ts: new Date().toISOString()}, p.state);
    p.el.dataset.ref = p.ref;
    this.pending.set(p.ref, p);
    this.list.appendChild(p.el);
    this.regroup(p.el);
    this.scrolled(true);
  }

  /** next returns the first message of ours still to send, in order. */
  next() {
    for (const p of this.pending.values()) {
      if (!p.id && p.state === 'queued') return p;
    }
    return null;
  }

  /**
   * setState updates a pending message's state: queued, pending, or
   * waiting (held back by the rate limit; note says for how long).
   */
  setState(p, state, note) {
    p.state = state;
    p.el.dataset.state = state;
    const label = p.el.querySelector('.msg-state');
    if (label) setText(label, note || STATE_TEXT[state] || '');
    const err = p.el.querySelector('.msg-error');
    if (err) err.remove();
  }

  /** ack confirms the pending message ref as message id. */
  ack(ref, id) {
    const p = this.pending.get(ref);
    if (!p) return;
    this.pending.delete(ref);
    if (p.id) return; // its message frame came first
    if (this.ids.has(id)) {
      p.el.remove(); // shown already from its message frame
      return;
    }
    this.ids.add(id);
    if (id > this.lastId) this.lastId = id;
    this.confirm(p, id, null);
  }

  confirm(p, id, ts) {
    p.id = id;
    p.state = 'sent';
    const el = p.el;
    el.dataset.id = id;
    el.dataset.state = 'sent';
    el.removeAttribute('data-ref');
    const label = el.querySelector('.msg-state');
    if (label) label.remove();
    if (ts) {
      el.dataset.ts = ts;
      const t = el.querySelector('.msg-time');
      if (t) {
        setText(t, clock(ts));
        t.setAttribute('datetime', ts);
      }
    }
    const next = el.nextElementSibling;
    el.remove();
    if (next) this.regroup(next);
    this.place(el, id);
  }

  /**
   * fail shows the server's refusal next to the pending message, with
   * Retry and Discard.
   */
  fail(ref, code, message, {retry, discard}) {
    const p = this.pending.get(ref);
    if (!p) return false;
    p.state = 'error';
    p.el.dataset.state = 'error';
    p.el.dataset.code = code;
    const label = p.el.querySelector('.msg-state');
    if (label) setText(label, '');
    const old = p.el.querySelector('.msg-error');
    if (old) old.remove();
    const why = message || {
      too_long: 'the message is too long',
      not_seated: 'you are not seated in this room',
    }[code] || code;
    p.el.querySelector('.msg-body').appendChild(
      h('div', {class: 'msg-error', 'data-testid': 'message-error', role: 'alert'},
        h('span', {}, `Not sent: ${why}`),
        h('button', {type: 'button', class: 'link', 'data-testid': 'message-retry', onclick: () => retry(p)}, 'Retry'),
        h('button', {type: 'button', class: 'link', 'data-testid': 'message-discard', onclick: () => discard(p)}, 'Discard')));
    return true;
  }

  /** discard removes a pending message. */
  discard(p) {
    this.pending.delete(p.ref);
    const next = p.el.nextElementSibling;
    p.el.remove();
    if (next) this.regroup(next);
  }

  /** unconfirmed lists the pending messages without an id. */
  unconfirmed() {
    return [...this.pending.values()].filter((p) => !p.id);
  }

  render(m, state) {
    const mine = m.from === this.me;
    return h('div', {
      class: mine ? 'msg mine' : 'msg',
      'data-testid': 'message',
      'data-id': m.id,
      'data-from': m.from,
      'data-ts': m.ts,
      'data-state': state,
    },
    avatar(m.from),
    h('div', {class: 'msg-body'},
      h('div', {class: 'msg-head'},
        h('span', {class: 'msg-from'}, m.from),
        h('time', {class: 'msg-time', datetime: m.ts, title: new Date(m.ts).toLocaleString()}, clock(m.ts)),
        STATE_TEXT[state] ? h('span', {class: 'msg-state'}, STATE_TEXT[state]) : null),
      h('p', {class: 'msg-text', 'data-testid': 'message-text'}, rich(m.text))));
  }

  // regroup marks el as a continuation of the message before it (same
  // sender, within GROUP_MS), and re-checks the one after it.
  regroup(el) {
    for (const n of [el, el.nextElementSibling]) {
      if (!n) continue;
      const prev = n.previousElementSibling;
      const cont = !!prev && prev.dataset.from === n.dataset.from &&
        Math.abs(Date.parse(n.dataset.ts) - Date.parse(prev.dataset.ts)) < GROUP_MS;
      n.classList.toggle('cont', cont);
    }
  }

  regroupAll() {
    for (const n of this.list.children) this.regroup(n);
  }

  /** place inserts a confirmed message by id, before the pending ones. */
  place(el, id) {
    this.trim();
    const stick = this.nearBottom();
    let after = null;
    for (let n = this.list.lastElementChild; n; n = n.previousElementSibling) {
      if (n.dataset.id && n.dataset.id < id) {
        after = n;
        break;
      }
    }
    if (after) after.after(el);
    else {
      // before every message with a greater id, and before pending ones
      let first = this.list.firstElementChild;
      while (first && !first.dataset.id && first.dataset.ref === undefined) first = first.nextElementSibling;
      this.list.insertBefore(el, first);
    }
    this.regroup(el);
    if (after === null || el.nextElementSibling === null || !el.nextElementSibling.dataset.id) {
      this.scrolled(stick);
    }
  }

  // trim keeps the view to the latest MAX_SHOWN confirmed messages.
  trim() {
    let extra = this.list.querySelectorAll('[data-id]').length - MAX_SHOWN + 1;
    for (let n = this.list.firstElementChild; n && extra > 0;) {
      const next = n.nextElementSibling;
      if (n.dataset.id && !n.dataset.ref) {
        n.remove();
        extra--;
      }
      n = next;
    }
    if (this.list.firstElementChild) this.regroup(this.list.firstElementChild);
  }

  nearBottom() {
    const l = this.list;
    return l.scrollHeight - l.scrollTop - l.clientHeight < 80;
  }

  scrolled(stick) {
    if (stick) this.scrollDown();
    else this.jump.hidden = false;
  }

  scrollDown() {
    this.list.scrollTop = this.list.scrollHeight;
    this.jump.hidden = true;
    this.onBottom();
  }
}
