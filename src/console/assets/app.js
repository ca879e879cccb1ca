// The console shell: sign-in, navigation and hash routing (#/page/arg), so
// the server only ever serves `/` and `/assets/*`.

import { h, put } from './dom.js';
import * as api from './api.js';
import * as pages from './pages.js';
import * as admin from './admin.js';

const PAGES = [
  ['search', 'Search', pages.search],
  ['write', 'Write', pages.write],
  ['timeline', 'Timeline', pages.timeline],
  ['inbox', 'Inbox', pages.inbox],
  ['documents', 'Documents', pages.documents],
  ['categories', 'Categories', pages.categories],
  ['consolidation', 'Consolidation', admin.consolidation],
  ['health', 'Health', admin.health],
  ['settings', 'Settings', admin.settings, 'admin'],
  ['tokens', 'Tokens', admin.tokens, 'admin'],
];
const HIDDEN = { memory: pages.memory };

let caps = null;

/** A hash segment, decoded; a malformed one stays as it is (the API then says NOT_FOUND). */
const decode = s => { try { return decodeURIComponent(s); } catch { return s; } };
const main = () => document.getElementById('main');

/** Shows a short message at the top; errors stay until the next one. */
export function flash(message, kind = 'ok') {
  const el = document.getElementById('flash');
  el.hidden = false;
  el.className = 'flash flash-' + kind;
  put(el, message);
  if (kind === 'ok') setTimeout(() => { if (el.textContent === message) el.hidden = true; }, 4000);
}

function signin(message) {
  caps = null;
  put(document.getElementById('nav'));
  put(document.getElementById('who'));
  const input = h('input', { type: 'password', id: 'token', name: 'token', autocomplete: 'off', required: true, placeholder: 'memd_…' });
  const form = h('form', { class: 'card signin', id: 'signin' },
    h('h1', null, 'Sign in'),
    h('p', { class: 'muted' }, 'Paste a memd token. The console sees exactly what the token may see; the token stays in this tab only.'),
    h('label', null, 'Token', input),
    h('button', { type: 'submit', id: 'signin-go' }, 'Sign in'),
    message ? h('p', { class: 'error' }, message) : null);
  form.addEventListener('submit', async e => {
    e.preventDefault();
    api.token.set(input.value.trim());
    try {
      caps = await api.get('/v1/capabilities');
    } catch (err) {
      api.token.clear();
      return signin(err.status === 401 ? 'That token is unknown or revoked.' : err.message);
    }
    if (!location.hash || location.hash === '#/' || location.hash === '#/signin') location.hash = '#/search';
    else render();
  });
  put(main(), form);
  input.focus();
}

function nav(current) {
  const scopes = caps.token.scopes || [];
  const links = PAGES.filter(([, , , need]) => !need || scopes.includes(need))
    .map(([id, label]) => h('a', { href: '#/' + id, id: 'nav-' + id, class: id === current ? 'on' : null }, label));
  put(document.getElementById('nav'), links);
  const out = h('button', { type: 'button', class: 'link', id: 'signout' }, 'Sign out');
  out.addEventListener('click', () => { api.token.clear(); location.hash = '#/signin'; signin(); });
  put(document.getElementById('who'), h('span', { id: 'token-name' }, caps.token.name), ' ', out);
}

async function render() {
  if (!api.token.get()) return signin();
  if (!caps) {
    try {
      caps = await api.get('/v1/capabilities');
    } catch (err) {
      api.token.clear();
      return signin(err.message);
    }
  }
  const [name, ...rest] = location.hash.replace(/^#\/?/, '').split('/');
  const page = PAGES.find(p => p[0] === name);
  const fn = page ? page[2] : HIDDEN[name] || pages.search;
  nav(page ? name : name === 'memory' ? '' : 'search');
  const el = main();
  put(el, h('p', { class: 'muted' }, 'Loading…'));
  const ctx = { caps, el, args: rest.map(decode), flash, go: hash => { location.hash = hash; } };
  try {
    await fn(ctx);
  } catch (err) {
    if (err.status === 401) { api.token.clear(); return signin('The token was revoked or is unknown.'); }
    put(el, h('div', { class: 'card error', id: 'page-error' }, h('strong', null, err.code || 'Error'), ': ', err.message));
  }
}

window.addEventListener('hashchange', render);
render();
