// Building the page from DOM nodes only. Untrusted text (memory text, tags,
// titles, reports) always becomes a Text node; nothing here parses HTML.

/** Creates an element: attributes (`class`, `on<event>` handlers, plain attributes) and children. */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'value') el.value = v;
    else if (k === 'checked') el.checked = Boolean(v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  add(el, children);
  return el;
}

/** Appends children: nodes as they are, anything else as text. */
export function add(el, children) {
  for (const c of [children].flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

/** Replaces the children of `el`. */
export function put(el, ...children) {
  el.replaceChildren();
  return add(el, children);
}

/** A safe class-name suffix for a value such as a privacy level. */
export function slug(v) {
  return String(v || '').toLowerCase().replace(/[^a-z0-9-]/g, '-').slice(0, 40);
}

/** A small label: scene, privacy, tier, stage. */
export function badge(kind, value) {
  if (value === null || value === undefined || value === '') return null;
  return h('span', { class: `badge b-${kind} b-${kind}-${slug(value)}`, title: kind }, String(value));
}

/** The badges every memory shows. */
export function badges(m) {
  return h('span', { class: 'badges' },
    badge('scene', m.scene), badge('privacy', m.privacy), badge('tier', m.tier),
    badge('stage', m.stage), m.origin === 'doc' ? badge('kind', 'document') : badge('kind', m.kind),
    m.expiring_soon ? badge('warn', 'expiring soon') : null);
}

/** `text` with every occurrence of `terms` wrapped in <mark> (case-insensitive), as nodes. */
export function highlight(text, terms) {
  const frag = document.createDocumentFragment();
  const words = [...new Set((terms || []).map(t => String(t).toLowerCase()).filter(t => t.length > 0))]
    .sort((a, b) => b.length - a.length);
  const lower = String(text).toLowerCase();
  let at = 0;
  // Lower-casing can change lengths outside ASCII; then fall back to plain text.
  if (words.length === 0 || lower.length !== String(text).length) {
    frag.append(document.createTextNode(String(text)));
    return frag;
  }
  while (at < text.length) {
    let best = -1, len = 0;
    for (const w of words) {
      const i = lower.indexOf(w, at);
      if (i >= 0 && (best < 0 || i < best || (i === best && w.length > len))) { best = i; len = w.length; }
    }
    if (best < 0) break;
    if (best > at) frag.append(document.createTextNode(text.slice(at, best)));
    frag.append(h('mark', null, text.slice(best, best + len)));
    at = best + len;
  }
  if (at < text.length) frag.append(document.createTextNode(text.slice(at)));
  return frag;
}

/** A short local date-time. */
export function when(ts) {
  if (!ts) return '';
  const d = new Date(ts);
  return Number.isNaN(d.getTime()) ? String(ts) : d.toLocaleString();
}

/** The first line (or title) of a memory, cut to `n` characters. */
export function headline(m, n = 80) {
  const t = (m.title || String(m.text || '').split('\n').find(l => l.trim()) || m.id).trim();
  return [...t].length > n ? [...t].slice(0, n).join('') + '…' : t;
}

/** A link to a memory's page. */
export function memoryLink(id, label) {
  return h('a', { href: '#/memory/' + encodeURIComponent(id), class: 'mlink' }, label || id);
}

/** A button that asks for a second click before it acts. */
export function confirmButton(label, confirmLabel, action, attrs = {}) {
  let armed = false;
  const b = h('button', { type: 'button', ...attrs }, label);
  b.addEventListener('click', async () => {
    if (!armed) { armed = true; b.textContent = confirmLabel; b.classList.add('danger'); return; }
    b.disabled = true;
    try { await action(); } finally { b.disabled = false; armed = false; b.textContent = label; b.classList.remove('danger'); }
  });
  return b;
}

/** A key/value table of plain values. */
export function table(rows, head) {
  return h('table', { class: 'kv' },
    head ? h('thead', null, h('tr', null, head.map(c => h('th', null, c)))) : null,
    h('tbody', null, rows.map(r => h('tr', null, r.map(c => h('td', null, c))))));
}
