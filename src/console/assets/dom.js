// Building the page from DOM nodes only. Untrusted text (memory text, tags,
// titles, reports) always becomes a Text node; nothing here parses HTML.
// This module also holds the console's plain words: what a scene, a privacy
// level, a tier or a stage is called on screen (the API's own words are in
// the details only).

/** Creates an element: attributes (`class`, `on<event>` handlers, plain attributes) and children. */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'value') el.value = v;
    else if (k === 'checked') el.checked = Boolean(v);
    else if (k === 'selected') el.selected = Boolean(v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  add(el, children);
  return el;
}

/** Appends children: nodes as they are, anything else as (cleaned) text. */
export function add(el, children) {
  for (const c of [children].flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(clean(String(c))));
  }
  return el;
}

/** Replaces the children of `el`. */
export function put(el, ...children) {
  el.replaceChildren();
  return add(el, children);
}

// Bidirectional embedding, override and isolate controls: in memory text
// they could reverse what is shown ("‮gpj.exe" reading as "exe.jpg"), so
// they are shown as a visible mark instead of acting.
const BIDI = /[\u202A-\u202E\u2066-\u2069]/g;

/** `s` with every bidirectional control character made visible. */
export function clean(s) {
  return String(s).replace(BIDI, c => `[U+${c.charCodeAt(0).toString(16).toUpperCase()}]`);
}

/** The language tag of a text, as far as its script tells (CJK scripts), else null. */
export function langOf(text) {
  const s = String(text || '');
  if (/[\u3040-\u30ff]/.test(s)) return 'ja';
  if (/[\uac00-\ud7af]/.test(s)) return 'ko';
  if (/[\u3400-\u9fff\uf900-\ufaff]/.test(s)) return 'zh';
  return null;
}

/** An element holding untrusted text, with its language marked. */
export function say(tag, attrs, text) {
  return h(tag, { ...attrs, lang: langOf(text) || (attrs && attrs.lang) || null }, text);
}

/** A safe class-name suffix for a value such as a privacy level. */
export function slug(v) {
  return String(v || '').toLowerCase().replace(/[^a-z0-9-]/g, '-').slice(0, 40);
}

/** A scene's name on screen: `qq:group:1` is "Group 1", `main` is "Main". */
export function sceneName(scene) {
  const s = String(scene || '');
  let m;
  if (s === 'main') return 'Main';
  if (s === 'pet') return 'Pet';
  if (s === 'qq:owner') return 'Owner chat';
  if ((m = /^qq:group:(.+)$/.exec(s))) return 'Group ' + m[1];
  if ((m = /^qq:private:(.+)$/.exec(s))) return 'Private chat ' + m[1];
  return s;
}

/** Privacy in plain words; `normal` needs no word. */
export const PRIVACY = { personal: 'Personal', sensitive: 'Sensitive', secret: 'Secret' };
/** Tiers in plain words: pinned, kept, ordinary. */
export const TIER = { t0: 'Pinned', t1: 'Kept', t2: 'Ordinary', t3: 'Ordinary' };
/** Stages in plain words. */
export const STAGE = { short: 'Chat', long: 'Memory' };

const SVG = 'http://www.w3.org/2000/svg';

/** A small lock icon (decorative: the word next to it says the same). */
export function lockIcon() {
  const svg = document.createElementNS(SVG, 'svg');
  svg.setAttribute('viewBox', '0 0 16 16');
  svg.setAttribute('class', 'icon');
  svg.setAttribute('aria-hidden', 'true');
  const path = document.createElementNS(SVG, 'path');
  path.setAttribute('d', 'M4 7V5a4 4 0 0 1 8 0v2h1v8H3V7zm2 0h4V5a2 2 0 0 0-4 0z');
  svg.append(path);
  return svg;
}

/** A small label. */
export function badge(kind, value, label, title) {
  if (!label) return null;
  return h('span', { class: `badge b-${kind} b-${kind}-${slug(value)}`, title: title || null, 'data-value': value }, label);
}

/** The labels a memory shows by default: scene, a lock for private ones, pinned/kept, chat, kind, sender. */
export function badges(m) {
  const kind = m.origin === 'doc' ? 'document' : ['note', 'chat'].includes(m.kind) ? null : m.kind;
  return h('span', { class: 'badges' },
    badge('scene', m.scene, sceneName(m.scene), m.scene),
    PRIVACY[m.privacy] ? h('span', { class: `badge b-privacy b-privacy-${slug(m.privacy)}`, 'data-value': m.privacy },
      lockIcon(), ' ', PRIVACY[m.privacy]) : null,
    ['t0', 't1'].includes(m.tier) ? badge('tier', m.tier, TIER[m.tier]) : null,
    m.stage === 'short' ? badge('stage', 'short', STAGE.short) : null,
    kind ? badge('kind', kind, kind) : null,
    m.speaker ? h('span', { class: 'sender', lang: langOf(m.speaker) }, 'from ', m.speaker) : null);
}

/** Tags shown to a person: the `from:<id>` tags of chat lines are the sender, shown by name instead. */
export function shownTags(m) {
  return (m.tags || []).filter(t => !/^from:/.test(t));
}

/** `text` with every occurrence of `terms` wrapped in <mark> (case-insensitive), as nodes. */
export function highlight(text, terms) {
  const frag = document.createDocumentFragment();
  text = clean(text);
  const words = [...new Set((terms || []).map(t => String(t).toLowerCase()).filter(t => t.length > 0))]
    .sort((a, b) => b.length - a.length);
  const lower = text.toLowerCase();
  let at = 0;
  // Lower-casing can change lengths outside ASCII; then fall back to plain text.
  if (words.length === 0 || lower.length !== text.length) {
    frag.append(document.createTextNode(text));
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

/** "in 3 hours", "2 days ago". */
export function relative(ts) {
  const d = new Date(ts);
  if (Number.isNaN(d.getTime())) return '';
  const s = (d.getTime() - Date.now()) / 1000;
  const a = Math.abs(s);
  const [n, unit] = a < 90 ? [Math.round(a), 'second'] : a < 5400 ? [Math.round(a / 60), 'minute']
    : a < 129600 ? [Math.round(a / 3600), 'hour'] : [Math.round(a / 86400), 'day'];
  const words = `${n} ${unit}${n === 1 ? '' : 's'}`;
  return s >= 0 ? 'in ' + words : words + ' ago';
}

/** Bytes in plain units. */
export function bytes(n) {
  const v = Number(n);
  if (!Number.isFinite(v)) return String(n);
  const units = ['bytes', 'KB', 'MB', 'GB', 'TB'];
  let i = 0, x = v;
  while (x >= 1024 && i < units.length - 1) { x /= 1024; i++; }
  return i === 0 ? `${v} bytes` : `${x.toFixed(x < 10 ? 1 : 0)} ${units[i]}`;
}

/** Seconds in plain units. */
export function duration(seconds) {
  const s = Math.max(0, Math.round(Number(seconds)));
  if (!Number.isFinite(s)) return String(seconds);
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min`;
  const hr = Math.floor(m / 60);
  if (hr < 48) return `${hr} h ${m % 60} min`;
  return `${Math.floor(hr / 24)} days ${hr % 24} h`;
}

/** The first line (or title) of a memory, cut to `n` characters. */
export function headline(m, n = 80) {
  const t = clean(m.title || String(m.text || '').split('\n').find(l => l.trim()) || m.id).trim();
  return [...t].length > n ? [...t].slice(0, n).join('') + '…' : t;
}

/** A link to a memory's (or a document's) page. */
export function memoryLink(id, label, attrs = {}) {
  const doc = /^doc-/.test(String(id));
  const href = doc ? '#/document/' + encodeURIComponent(String(id).split('#')[0]) : '#/memory/' + encodeURIComponent(id);
  return h('a', { href, class: 'mlink', lang: langOf(label), ...attrs }, label || id);
}

/**
 * A button that asks before it acts: the first click shows a red confirm
 * button and a Cancel button next to it; the confirm runs `action`.
 */
export function confirmButton(label, question, confirmLabel, action, attrs = {}) {
  const wrap = h('span', { class: 'confirm' });
  const first = h('button', { type: 'button', ...attrs }, label);
  const yes = h('button', { type: 'button', class: 'danger', id: attrs.id ? attrs.id.replace(/-go$/, '') + '-confirm' : null }, confirmLabel);
  const no = h('button', { type: 'button', class: 'secondary' }, 'Cancel');
  const ask = h('span', { class: 'ask', role: 'group', 'aria-label': question, hidden: true }, h('span', { class: 'question' }, question), ' ', yes, ' ', no);
  first.addEventListener('click', () => { first.hidden = true; ask.hidden = false; yes.focus(); });
  no.addEventListener('click', () => { ask.hidden = true; first.hidden = false; first.focus(); });
  yes.addEventListener('click', async () => {
    yes.disabled = true;
    try { await action(); } finally { yes.disabled = false; }
  });
  return add(wrap, [first, ask]);
}

/** A table of plain values, in a focusable scroll box when it is wide. */
export function table(rows, head, label) {
  return h('div', { class: 'scroll', tabindex: 0, role: 'region', 'aria-label': label || 'table' },
    h('table', { class: 'kv' },
      head ? h('thead', null, h('tr', null, head.map(c => h('th', { scope: 'col' }, c)))) : null,
      h('tbody', null, rows.map(r => h('tr', null, r.map(c => h('td', null, c)))))));
}

/** A labelled form control: the label wraps the text and the control. */
export function field(label, control, hint) {
  return h('label', { class: 'field' }, h('span', { class: 'label' }, label), control,
    hint ? h('span', { class: 'hint' }, hint) : null);
}
