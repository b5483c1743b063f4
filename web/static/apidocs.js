// The API page: lists every operation of the server's OpenAPI document
// (GET /api/v1/openapi.json), grouped by path, with its methods, who may call
// it, its summary and its answers. Text only: nothing from the document is
// inserted as HTML.

const methods = ['get', 'post', 'put', 'delete', 'patch'];

function el(tag, props = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c);
  return e;
}

function who(op, doc) {
  const sec = op.security ?? doc.security ?? [];
  if (sec.length === 0) return 'anyone';
  return sec.map((s) => Object.keys(s).map((k) => k.replace(/Token$/, '')).join('+')).join(' or ');
}

function render(doc, filter) {
  const list = document.getElementById('apidocs-list');
  list.replaceChildren();
  const q = filter.trim().toLowerCase();
  let shown = 0;
  for (const [path, item] of Object.entries(doc.paths ?? {}).sort(([a], [b]) => a.localeCompare(b))) {
    const ops = methods.filter((m) => item[m]);
    const rows = [];
    for (const m of ops) {
      const op = item[m];
      const text = `${m} ${path} ${op.summary ?? ''} ${op.description ?? ''}`.toLowerCase();
      if (q && !text.includes(q)) continue;
      const codes = Object.keys(op.responses ?? {}).join(' ');
      rows.push(el('li', { class: 'apidocs-op', 'data-testid': 'apidocs-op' },
        el('span', { class: `apidocs-method apidocs-${m}`, text: m.toUpperCase() }), ' ',
        el('span', { class: 'apidocs-who', text: who(op, doc) }), ' ',
        el('span', { class: 'apidocs-summary', text: op.summary ?? '' }), ' ',
        el('span', { class: 'muted apidocs-codes', text: codes })));
    }
    if (rows.length === 0) continue;
    shown += rows.length;
    list.append(el('section', { class: 'card apidocs-path' },
      el('h2', {}, el('code', { text: path })), el('ul', {}, ...rows)));
  }
  document.getElementById('apidocs-status').textContent =
    `${shown} operation${shown === 1 ? '' : 's'}${q ? ` matching “${filter.trim()}”` : ''} — ${doc.info?.title ?? 'API'} ${doc.info?.version ?? ''}`;
}

async function main() {
  const status = document.getElementById('apidocs-status');
  let doc;
  try {
    const resp = await fetch('/api/v1/openapi.json');
    if (!resp.ok) throw new Error(`the server answered ${resp.status}`);
    doc = await resp.json();
  } catch (err) {
    status.textContent = `Could not load the API document: ${err.message}`;
    return;
  }
  const filter = document.getElementById('apidocs-filter');
  filter.addEventListener('input', () => render(doc, filter.value));
  render(doc, filter.value);
}

main();
