// The console shell: sign-in, navigation and hash routing. Every view's
// state is in the URL (`#/page/arg?q=…&mode=…`), so Back, Forward and
// bookmarks work, and the server only ever serves `/` and `/assets/*`.
// Navigation sets the document title and moves focus to the page heading.

import { h, put } from './dom.js';
import * as api from './api.js';
import * as find from './find.js';
import * as memory from './memory.js';
import * as browse from './browse.js';
import * as docs from './docs.js';
import * as admin from './admin.js';

// [id, label, page, needs]: `needs` is a scope, or a function of the capabilities.
const PAGES = [
  ['search', 'Search', find.search],
  ['write', 'Write', find.write, caps => (caps.token.write_scenes || []).length > 0],
  ['timeline', 'Timeline', browse.timeline],
  ['inbox', 'Inbox', browse.inbox],
  ['documents', 'Documents', docs.documents],
  ['categories', 'Categories', docs.categories],
  ['forgotten', 'Forgotten', memory.forgotten],
  ['consolidation', 'Consolidation', admin.consolidation, 'admin'],
  ['health', 'Health', admin.health],
  ['settings', 'Settings', admin.settings, 'admin'],
  ['tokens', 'Tokens', admin.tokens, 'admin'],
];
const HIDDEN = { memory: ['Memory', memory.memory], document: ['Document', docs.documentPage] };

let caps = null;

/** A hash segment, decoded; a malformed one stays as it is (the API then says NOT_FOUND). */
const decode = s => { try { return decodeURIComponent(s); } catch { return s; } };
const main = () => document.getElementById('main');

/** Whether the signed-in token may open `page`. */
function allowed(page) {
  const need = page[3];
  if (!need) return true;
  if (typeof need === 'function') return need(caps);
  return (caps.token.scopes || []).includes(need);
}

/** Shows a short message at the top, with an optional action button; errors stay until the next one. */
export function flash(message, kind = 'ok', action) {
  const el = document.getElementById('flash');
  flashAge = 0;
  el.hidden = false;
  el.className = 'flash flash-' + kind;
  put(el, h('span', null, message), action ? [' ', action] : null);
  if (kind === 'ok' && !action) setTimeout(() => { if (el.firstChild && el.firstChild.textContent === message) el.hidden = true; }, 4000);
}

function clearFlash() {
  const el = document.getElementById('flash');
  el.hidden = true;
  put(el);
}

/** The sign-in form; `message` says why it is shown again. */
export function signin(message) {
  caps = null;
  document.title = 'Sign in · memd';
  put(document.getElementById('nav'));
  put(document.getElementById('who'));
  const input = h('input', { type: 'password', id: 'token', name: 'token', autocomplete: 'off', required: true, placeholder: 'memd_…' });
  const form = h('form', { class: 'card signin', id: 'signin' },
    h('h1', { tabindex: -1 }, 'Sign in'),
    h('p', { class: 'muted' }, 'Paste a memd token. The console sees exactly what the token may see; the token stays in this tab only.'),
    h('label', { class: 'field' }, h('span', { class: 'label' }, 'Token'), input),
    h('button', { type: 'submit', id: 'signin-go' }, 'Sign in'),
    message ? h('p', { class: 'error', role: 'alert' }, message) : null);
  form.addEventListener('submit', async e => {
    e.preventDefault();
    api.token.set(input.value.trim());
    try {
      caps = await api.get('/v1/capabilities');
    } catch (err) {
      api.token.clear();
      return signin(err.status === 401 ? 'That token is unknown or revoked.' : err.message);
    }
    if (!location.hash || location.hash === '#/' || location.hash.startsWith('#/signin')) location.hash = '#/search';
    else render();
  });
  put(main(), form);
  input.focus();
}

function nav(current) {
  const links = PAGES.filter(allowed)
    .map(([id, label]) => h('a', { href: '#/' + id, id: 'nav-' + id, class: id === current ? 'on' : null,
      'aria-current': id === current ? 'page' : null }, label));
  put(document.getElementById('nav'), links);
  const out = h('button', { type: 'button', class: 'link', id: 'signout' }, 'Sign out');
  out.addEventListener('click', () => { api.token.clear(); location.hash = '#/signin'; signin(); });
  put(document.getElementById('who'), h('span', { class: 'muted' }, 'Signed in as '), h('strong', { id: 'token-name' }, caps.token.name), ' ', out);
}

/** The current route: page name, path arguments and query parameters. */
function route() {
  const [path, query] = location.hash.replace(/^#\/?/, '').split('?');
  const [name, ...rest] = path.split('/');
  return { name, args: rest.map(decode), params: new URLSearchParams(query || '') };
}

/** The hash of `page` with `args` and the non-empty `params`. */
export function hashOf(page, args = [], params = {}) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v === null || v === undefined || v === '' || (Array.isArray(v) && !v.length)) continue;
    q.set(k, Array.isArray(v) ? v.join(',') : String(v));
  }
  const path = ['#', page, ...args.map(encodeURIComponent)].join('/');
  const qs = q.toString();
  return qs ? `${path}?${qs}` : path;
}

let rendering = 0;

async function render() {
  if (!api.token.get()) return signin();
  if (!caps) {
    try {
      caps = await api.get('/v1/capabilities');
    } catch (err) {
      api.token.clear();
      return signin(err.status === 401 ? 'The token was revoked or is unknown.' : err.message);
    }
  }
  const r = route();
  const page = PAGES.find(p => p[0] === r.name && allowed(p));
  const hidden = HIDDEN[r.name];
  const [label, fn] = page ? [page[1], page[2]] : hidden || ['Search', find.search];
  nav(page ? r.name : hidden ? '' : 'search');
  const mine = ++rendering;
  // The page is built off-screen and shown once it is ready, if no later
  // navigation started meanwhile: a slow page never overwrites a newer one.
  const el = h('div', { class: 'page' });
  put(main(), h('p', { class: 'muted' }, 'Loading…'));
  document.title = `${label} · memd`;
  const ctx = {
    caps, el, args: r.args, params: r.params, flash, signin,
    go: hash => { location.hash = hash; },
    // Replaces the URL's state without a new history entry (a page of results loaded).
    replace: hash => { history.replaceState(null, '', hash); },
    hashOf,
  };
  try {
    await fn(ctx);
  } catch (err) {
    if (err.status === 401) { api.token.clear(); return signin('The token was revoked or is unknown.'); }
    put(el, h('h1', null, label), h('div', { class: 'card error', id: 'page-error', role: 'alert' }, h('strong', null, err.code || 'Error'), ': ', err.message));
  }
  if (mine !== rendering || !api.token.get()) return;
  put(main(), el);
  const h1 = el.querySelector('h1');
  if (h1) {
    document.title = `${h1.textContent} · memd`;
    h1.setAttribute('tabindex', '-1');
  }
  // Focus goes to the page's own first field when it asks (an empty search), else to its heading.
  const first = el.querySelector('[data-focus]') || h1;
  if (first) first.focus({ preventScroll: true });
}

// `/` jumps to search from anywhere but a text field.
window.addEventListener('keydown', e => {
  if (e.key !== '/' || e.ctrlKey || e.metaKey || e.altKey) return;
  const t = e.target;
  if (t && (t.isContentEditable || ['INPUT', 'TEXTAREA', 'SELECT'].includes(t.tagName))) return;
  const q = document.getElementById('q');
  e.preventDefault();
  if (q) { q.focus(); q.select(); } else location.hash = '#/search';
});

window.addEventListener('hashchange', () => { clearFlashIfStale(); render(); });

// A message survives one navigation (the page an action led to shows it), not two.
let flashAge = 0;
function clearFlashIfStale() {
  const el = document.getElementById('flash');
  if (el.hidden) { flashAge = 0; return; }
  if (++flashAge > 1) { clearFlash(); flashAge = 0; }
}

render();
