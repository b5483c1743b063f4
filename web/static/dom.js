// DOM helpers. Every piece of user text goes in through textContent (a
// string child of h), never through innerHTML, so nothing a user types can
// become markup.

/**
 * h builds an element: h('li', {class: 'msg', 'data-id': id}, 'text', child).
 * Attribute values are set with setAttribute; "on*" keys with function values
 * become event listeners; string children become text nodes.
 */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') {
      el.addEventListener(k.slice(2), v);
    } else if (v === true) {
      el.setAttribute(k, '');
    } else {
      el.setAttribute(k, String(v));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
}

/** $ returns the element with this id. */
export const $ = (id) => document.getElementById(id);

/** clear removes every child of el. */
export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
}

/** setText sets el's text (as text, never as markup). */
export function setText(el, text) {
  el.textContent = text == null ? '' : String(text);
}

/** avatar is a coloured circle with the first letter of name. */
export function avatar(name) {
  const el = h('span', {class: 'avatar', 'aria-hidden': 'true'}, (name || '?').slice(0, 1));
  el.style.background = `hsl(${hue(name)} 55% 48%)`;
  return el;
}

function hue(s) {
  let x = 0;
  for (const ch of String(s)) x = (x * 31 + ch.codePointAt(0)) >>> 0;
  return x % 360;
}

/** clock formats an RFC 3339 time as local HH:MM. */
export function clock(ts) {
  const d = new Date(ts);
  if (Number.isNaN(d.getTime())) return '';
  return d.toLocaleTimeString([], {hour: '2-digit', minute: '2-digit'});
}

/** ago formats an RFC 3339 time as "12 s ago". */
export function ago(ts) {
  const d = new Date(ts);
  if (Number.isNaN(d.getTime())) return '—';
  const s = Math.max(0, Math.round((Date.now() - d.getTime()) / 1000));
  if (s < 90) return `${s} s ago`;
  if (s < 5400) return `${Math.round(s / 60)} min ago`;
  return d.toLocaleString();
}
