// The admin panel: live settings (validated by the server, its message shown
// next to the field), notices to everyone, the nodes and the lobby's rooms.

import {api, seg, session} from './api.js';
import {h, $, ago, clear, setText} from './dom.js';

const REFRESH_MS = 5000;

export class Admin {
  constructor({token, visible, lobby, room}) {
    this.token = token;
    this.visible = visible;
    this.lobby = lobby; // () => current lobby
    this.room = room; // () => current room id
    this.defs = [];
    this.values = {};
    this.fields = new Map(); // key -> {input, error, def}
    this.timer = 0;

    const tok = $('admin-token');
    tok.value = session.adminToken();
    $('admin-token-form').addEventListener('submit', (e) => {
      e.preventDefault();
      session.setAdminToken(tok.value.trim());
      setText($('admin-error'), tok.value.trim() ? '' : 'No admin token: settings and notices will be refused.');
    });
    tok.addEventListener('change', () => session.setAdminToken(tok.value.trim()));
    $('notice-form').addEventListener('submit', (e) => {
      e.preventDefault();
      this.postNotice();
    });
    $('admin-refresh').addEventListener('click', () => this.refresh());
  }

  adminToken() {
    return $('admin-token').value.trim() || session.adminToken();
  }

  async start() {
    try {
      const res = await api('GET', '/settings/defs', {token: this.token});
      this.defs = (res.settings || res.defs || []).map(normalize).filter((d) => d.key);
    } catch (err) {
      setText($('admin-error'), `Settings registry: ${err.message}`);
    }
    this.renderSettings();
    this.timer = setInterval(() => {
      if (this.visible() && document.visibilityState === 'visible') this.refresh();
    }, REFRESH_MS);
  }

  stop() {
    clearInterval(this.timer);
  }

  /** setValues takes the values of GET /settings. */
  setValues(values) {
    this.values = {...values};
    for (const key of Object.keys(this.values)) this.show(key);
  }

  /** setValue takes one live settings frame. */
  setValue(key, value) {
    this.values[key] = value;
    this.show(key);
  }

  show(key) {
    const f = this.fields.get(key);
    if (!f) return;
    // Never overwrite what the admin is typing.
    if (document.activeElement === f.input || f.input.dataset.dirty === 'true') return;
    f.input.value = toInput(this.values[key]);
  }

  renderSettings() {
    const list = $('settings-list');
    clear(list);
    this.fields.clear();
    for (const d of this.defs) {
      const id = `setting-${d.key.replace(/[^A-Za-z0-9_-]/g, '-')}`;
      const numeric = d.type === 'int' || d.type === 'number';
      const input = numeric
        ? h('input', {
          id, type: 'number', inputmode: d.type === 'int' ? 'numeric' : 'decimal',
          step: d.type === 'int' ? '1' : 'any', min: d.min, max: d.max,
          'data-testid': `setting-${d.key}`, 'aria-describedby': `${id}-desc ${id}-err`,
        })
        : h('textarea', {
          id, rows: 2, maxlength: d.max || undefined,
          'data-testid': `setting-${d.key}`, 'aria-describedby': `${id}-desc ${id}-err`,
        });
      input.addEventListener('input', () => { input.dataset.dirty = 'true'; });
      input.addEventListener('keydown', (e) => {
        if (e.key === 'Enter' && (numeric || e.ctrlKey || e.metaKey)) {
          e.preventDefault();
          this.save(d.key);
        }
      });
      const error = h('p', {id: `${id}-err`, class: 'form-error', role: 'alert', 'data-testid': `setting-error-${d.key}`});
      const ok = h('p', {class: 'form-result', role: 'status', 'data-testid': `setting-ok-${d.key}`});
      list.appendChild(h('div', {class: 'setting', 'data-key': d.key},
        h('label', {for: id}, d.key),
        h('p', {class: 'desc', id: `${id}-desc`}, d.description),
        h('div', {class: 'row'},
          input,
          h('button', {type: 'button', 'data-testid': `setting-save-${d.key}`, onclick: () => this.save(d.key)}, 'Save'),
          h('button', {type: 'button', class: 'ghost', title: 'back to the default',
            'data-testid': `setting-reset-${d.key}`, onclick: () => this.reset(d.key)}, 'Reset')),
        h('div', {class: 'meta'}, describe(d)),
        error, ok));
      this.fields.set(d.key, {input, error, ok, def: d});
      this.show(d.key);
    }
  }

  async save(key) {
    const f = this.fields.get(key);
    const raw = f.input.value;
    let value = raw;
    if (f.def.type !== 'string') {
      // A number when it reads as one; otherwise the text itself, so the
      // server says what is wrong with it.
      const n = Number(raw);
      value = raw.trim() !== '' && Number.isFinite(n) ? n : raw;
    }
    await this.write(f, 'PUT', {value});
  }

  async reset(key) {
    await this.write(this.fields.get(key), 'DELETE', undefined);
  }

  async write(f, method, body) {
    setText(f.error, '');
    setText(f.ok, '');
    try {
      const res = await api(method, `/settings/${seg(f.def.key)}`, {token: this.adminToken(), body});
      f.input.dataset.dirty = 'false';
      setText(f.ok, method === 'DELETE' ? `Back to the default (version ${res.version}).` : `Saved (version ${res.version}).`);
      if (method === 'DELETE') {
        this.values[f.def.key] = f.def.default;
        f.input.value = toInput(f.def.default);
      }
      setTimeout(() => setText(f.ok, ''), 4000);
    } catch (err) {
      setText(f.error, err.status === 401 || err.status === 403
        ? `${err.message} — enter the admin token above.`
        : err.message);
    }
  }

  async postNotice() {
    const input = $('notice-text');
    const text = input.value.trim();
    setText($('notice-result'), '');
    setText($('admin-error'), '');
    if (!text) {
      setText($('admin-error'), 'Write the notice first.');
      input.focus();
      return;
    }
    try {
      const res = await api('POST', '/notices', {token: this.adminToken(), body: {text}});
      input.value = '';
      setText($('notice-result'), `Posted (id ${res.id}).`);
    } catch (err) {
      setText($('admin-error'), err.message);
    }
  }

  async refresh() {
    const lobby = this.lobby();
    setText($('rooms-lobby'), lobby || '—');
    try {
      const [nodes, rooms] = await Promise.all([
        api('GET', '/nodes', {token: this.token}),
        lobby ? api('GET', `/lobbies/${seg(lobby)}/rooms`, {token: this.token}) : {rooms: []},
      ]);
      $('nodes-body').replaceChildren(...(nodes.nodes || []).map((n) => h('tr', {'data-testid': 'node-row'},
        h('td', {}, n.id),
        h('td', {}, n.addr || '—'),
        h('td', {class: 'num'}, n.connections),
        h('td', {}, ago(n.last_heartbeat)))));
      const current = this.room();
      $('rooms-body').replaceChildren(...(rooms.rooms || []).map((r) => h('tr', {
        'data-testid': 'room-row', class: r.id === current ? 'current' : null,
      },
      h('td', {}, `room ${r.seq}`),
      h('td', {class: 'num'}, `${(r.members || []).length}/${r.capacity}`),
      h('td', {}, (r.members || []).join(', ')))));
    } catch (err) {
      setText($('admin-error'), err.message);
    }
  }
}

/** normalize reads a settings definition whatever the case of its fields. */
function normalize(d) {
  const g = (k) => (d[k] !== undefined ? d[k] : d[k[0].toUpperCase() + k.slice(1)]);
  return {
    key: g('key'),
    type: g('type'),
    description: g('description') || '',
    default: g('default'),
    min: g('min'),
    max: g('max'),
    minExclusive: d.min_exclusive ?? d.minExclusive ?? d.MinExclusive ?? false,
  };
}

function describe(d) {
  const def = d.type === 'string' ? JSON.stringify(d.default ?? '') : String(d.default);
  if (d.type === 'string') return `text, at most ${d.max} characters · default ${def}`;
  const lo = d.minExclusive ? `> ${d.min}` : `≥ ${d.min}`;
  return `${d.type === 'int' ? 'integer' : 'number'} ${lo}, ≤ ${d.max} · default ${def}`;
}

function toInput(v) {
  return v === undefined || v === null ? '' : String(v);
}
