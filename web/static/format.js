// Message text to DOM nodes: links (http and https only), **bold**,
// _italic_ and `code`. Every piece of text goes in as a text node; the only
// elements made are <a>, <strong>, <em> and <code>, built with
// createElement. No string from a message is ever parsed as HTML.

const URL_RE = /\bhttps?:\/\/[^\s<>"'`]+/gi;
// A trailing ")", ".", ",", etc. usually ends the sentence, not the URL.
const TRAILING = /[).,;:!?\]}'"]+$/;

/**
 * rich returns a DocumentFragment showing text with its inline marks.
 * Code spans are literal: no marks or links inside them.
 */
export function rich(text) {
  const frag = document.createDocumentFragment();
  const parts = String(text).split(/(`[^`\n]+`)/);
  for (const part of parts) {
    if (part.length > 2 && part.startsWith('`') && part.endsWith('`')) {
      const code = document.createElement('code');
      code.textContent = part.slice(1, -1);
      frag.appendChild(code);
    } else if (part) {
      marks(frag, part);
    }
  }
  return frag;
}

// marks adds text with **bold** and _italic_ spans (not nested in each
// other, never across lines) and links.
function marks(parent, text) {
  const re = /\*\*([^*\n]+?)\*\*|(^|[^A-Za-z0-9_])_([^_\n]+?)_(?![A-Za-z0-9_])/g;
  let at = 0;
  for (let m = re.exec(text); m; m = re.exec(text)) {
    if (m[1] !== undefined) {
      links(parent, text.slice(at, m.index));
      const b = document.createElement('strong');
      links(b, m[1]);
      parent.appendChild(b);
    } else {
      links(parent, text.slice(at, m.index) + m[2]);
      const i = document.createElement('em');
      links(i, m[3]);
      parent.appendChild(i);
    }
    at = re.lastIndex;
  }
  links(parent, text.slice(at));
}

// links adds text with its http(s) URLs as links that open in a new tab
// without a referrer or a window.opener.
function links(parent, text) {
  let at = 0;
  URL_RE.lastIndex = 0;
  for (let m = URL_RE.exec(text); m; m = URL_RE.exec(text)) {
    let href = m[0];
    const trail = href.match(TRAILING);
    if (trail) href = href.slice(0, -trail[0].length);
    const url = safeURL(href);
    if (!url) continue;
    if (m.index > at) parent.appendChild(document.createTextNode(text.slice(at, m.index)));
    const a = document.createElement('a');
    a.href = url;
    a.textContent = href;
    a.target = '_blank';
    a.rel = 'noopener noreferrer';
    parent.appendChild(a);
    at = m.index + href.length;
    URL_RE.lastIndex = at;
  }
  if (at < text.length) parent.appendChild(document.createTextNode(text.slice(at)));
}

// safeURL returns the normalised URL when it parses as http or https.
function safeURL(s) {
  try {
    const u = new URL(s);
    return u.protocol === 'http:' || u.protocol === 'https:' ? u.href : '';
  } catch {
    return '';
  }
}
