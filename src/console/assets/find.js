// Search and write. The search page keeps its whole state in the URL
// (query, how to match, scenes, pages shown), starts with the latest
// memories before anything is typed, and says in words why each hit
// matched. The write form offers only what the token may use.

import { h, put, add, badges, highlight, when, headline, memoryLink, sceneName, shownTags, langOf, field, PRIVACY } from './dom.js';
import * as api from './api.js';

/** Scenes the token may read, sorted: its own, and for an all-scenes ('*') token every scene with memories. */
export async function readableScenes(caps) {
  const scenes = new Set(caps.token.scenes || []);
  if ((caps.token.scopes || []).includes('*')) {
    try {
      const hl = await api.get('/v1/health');
      for (const s of Object.keys((hl.counts && hl.counts.by_scene) || {})) scenes.add(s);
    } catch { /* the token's own scenes are enough to search */ }
  }
  return [...scenes].sort((a, b) => sceneName(a).localeCompare(sceneName(b)) || a.localeCompare(b));
}

const MODES = [['hybrid', 'Words and meaning'], ['fulltext', 'Exact words'], ['semantic', 'Similar meaning']];
const REASON = { and: 'Has all your words', or: 'Has some of your words', semantic: 'Similar in meaning' };

/** Why a hit is in the list, in words. */
function reason(hit, card) {
  if (hit.pass === 'semantic') return REASON.semantic;
  if (!card.querySelector('mark')) return 'Matched its title, tags or a line next to it';
  return REASON[hit.pass] || '';
}

/** One memory in a list: headline link, labels, time, text with highlighted terms. */
export function card(m, terms, extra) {
  const text = String(m.text || '').slice(0, 600);
  const c = h('article', { class: 'card memory', 'data-id': m.id },
    h('h3', { class: 'headline' }, memoryLink(m.doc_id && m.origin === 'doc' ? m.doc_id : m.id, headline(m, 90))),
    h('div', { class: 'meta' }, badges(m), h('time', { datetime: m.ts }, when(m.ts))),
    h('div', { class: 'text', lang: langOf(text) }, highlight(text, terms)),
    h('div', { class: 'foot' },
      shownTags(m).length ? h('span', { class: 'tags' }, shownTags(m).map(t => h('span', { class: 'tag', lang: langOf(t) }, t))) : null,
      extra));
  return c;
}

/** The search form; submitting puts its state into the URL. */
function searchForm(ctx, scenes, state) {
  const q = h('input', { type: 'search', id: 'q', name: 'q', value: state.query, placeholder: 'Search memories…  (press / anywhere)', lang: langOf(state.query) });
  const mode = h('select', { id: 'mode', name: 'mode' }, MODES.map(([v, label]) =>
    h('option', { value: v, selected: v === state.mode }, label + (v === state.defaultMode ? ' (default)' : ''))));
  const boxes = scenes.map(s => h('label', { class: 'check' },
    h('input', { type: 'checkbox', name: 'scene', value: s, checked: state.scenes.includes(s), id: 'scene-' + s.replace(/[^a-z0-9-]/gi, '-') }), sceneName(s)));
  const form = h('form', { class: 'card', id: 'search-form', role: 'search' },
    h('div', { class: 'row' }, h('label', { class: 'sr-only', for: 'q' }, 'Search memories'), q,
      h('button', { type: 'submit', id: 'search-go' }, 'Search')),
    h('div', { class: 'row wrap options' }, field('How to match', mode),
      boxes.length > 1 ? h('fieldset', { class: 'scenes' }, h('legend', null, 'Scenes'), boxes) : null));
  form.addEventListener('submit', e => {
    e.preventDefault();
    const chosen = boxes.map(b => b.querySelector('input')).filter(i => i.checked).map(i => i.value);
    ctx.go(ctx.hashOf('search', [], {
      q: q.value.trim(),
      mode: mode.value === state.defaultMode ? '' : mode.value,
      scenes: chosen.length < scenes.length ? chosen : [],
    }));
  });
  return { form, q };
}

export async function search(ctx) {
  const scenes = await readableScenes(ctx.caps);
  const p = ctx.params;
  const defaultMode = (ctx.caps.features && ctx.caps.features.defaultMode) || 'hybrid';
  const state = {
    query: p.get('q') || '',
    mode: p.get('mode') || defaultMode,
    defaultMode,
    scenes: p.get('scenes') ? p.get('scenes').split(',').filter(s => scenes.includes(s)) : scenes,
    pages: Math.max(1, Math.min(9, Number(p.get('page')) || 1)),
  };
  const { form, q } = searchForm(ctx, scenes, state);
  const results = h('div', { id: 'results', 'aria-live': 'polite' });
  put(ctx.el, h('h1', null, state.query ? `Search: ${state.query}` : 'Search'), form, results);
  if (!state.query) q.setAttribute('data-focus', '');
  const narrowed = state.scenes.length < scenes.length ? state.scenes : undefined;
  if (!state.query) return latest(ctx, results, narrowed);
  await searchResults(ctx, results, state, narrowed);
}

/** Before anything is typed: the newest memories. */
async function latest(ctx, results, scenes) {
  const r = await api.post('/v1/recent', { limit: 10, scenes });
  put(results, h('h2', null, 'Latest memories'),
    r.items.length ? r.items.map(m => card(m, [])) : h('p', { class: 'muted' }, 'Nothing remembered yet.'));
}

/** The hits of `state.pages` pages, and a button for the next. */
async function searchResults(ctx, results, state, scenes) {
  const size = Math.max(1, Math.min(10, (ctx.caps.limits && ctx.caps.limits.maxLimit) || 10));
  const body = { query: state.query, scenes, limit: size };
  if (state.mode !== state.defaultMode) body.mode = state.mode;
  const list = h('div', { class: 'hits' });
  const count = h('p', { class: 'muted', id: 'result-count' });
  const more = h('button', { type: 'button', id: 'more', class: 'secondary' }, 'More results');
  let shown = 0, next = 0, page = 0, terms = [];
  const load = async () => {
    const r = await api.post('/v1/search', { ...body, offset: next });
    terms = r.terms || terms;
    for (const hit of r.hits) {
      const c = card(hit, terms);
      add(c.querySelector('.foot'), h('span', { class: 'why muted small' }, reason(hit, c)));
      list.append(c);
    }
    shown += r.hits.length;
    page += 1;
    next = r.next_offset || null;
    more.hidden = !next;
    put(count, shown === 0 ? 'No memory matches.' : `Showing ${shown} result${shown === 1 ? '' : 's'}`,
      next ? ' · more below' : shown ? ' · that is all' : '',
      r.fallback ? h('span', { class: 'small' }, ' (searched for exact words: ', r.fallback, ')') : null);
    return r;
  };
  put(results, count, list, more);
  more.hidden = true;
  for (let i = 0; i < state.pages && (i === 0 || next); i++) await load();
  more.addEventListener('click', async () => {
    more.disabled = true;
    try {
      const before = list.childElementCount;
      await load();
      ctx.replace(ctx.hashOf('search', [], { q: state.query, mode: body.mode, scenes, page }));
      const first = list.children[before];
      if (first) { const a = first.querySelector('a'); if (a) a.focus(); }
    } catch (err) { ctx.flash(`${err.code}: ${err.message}`, 'error'); }
    finally { more.disabled = false; }
  });
}

const KINDS = ['note', 'fact', 'preference', 'event', 'todo', 'decision'];

/** The privacy levels and tiers this token may write. */
export function writeChoices(caps) {
  const scopes = caps.token.scopes || [];
  const privacy = ['normal', 'personal'];
  if (scopes.includes('sensitive:read')) privacy.push('sensitive');
  if (scopes.includes('secret:write')) privacy.push('secret');
  const tiers = scopes.includes('*') ? ['t0', 't1', 't2'] : ['t1', 't2'];
  return { privacy, tiers };
}

export const TIER_WORDS = { t0: 'Pinned (always kept, ranked first)', t1: 'Kept (a year)', t2: 'Ordinary', t3: 'Short-lived' };
const PRIVACY_WORDS = { normal: 'Anyone who may read the scene', ...Object.fromEntries(Object.entries(PRIVACY).map(([k, v]) => [k, v])) };

export async function write(ctx) {
  const scenes = ctx.caps.token.write_scenes || [];
  if (!scenes.length) return put(ctx.el, h('h1', null, 'Write'), h('p', { class: 'muted' }, 'This sign-in may not write.'));
  const { privacy: levels, tiers } = writeChoices(ctx.caps);
  const text = h('textarea', { id: 'w-text', name: 'text', rows: 5, required: true, placeholder: 'What should memd remember?' });
  text.addEventListener('input', () => { const l = langOf(text.value); if (l) text.setAttribute('lang', l); else text.removeAttribute('lang'); });
  const title = h('input', { id: 'w-title', name: 'title', placeholder: 'optional' });
  const kind = h('select', { id: 'w-kind', name: 'kind' }, KINDS.map(k => h('option', { value: k }, k)));
  const happened = h('input', { id: 'w-time', name: 'time', placeholder: 'e.g. 2026-05-08, last Friday, 去年五月' });
  const scene = h('select', { id: 'w-scene', name: 'scene' }, scenes.map(s => h('option', { value: s }, sceneName(s))));
  const privacy = h('select', { id: 'w-privacy', name: 'privacy' }, levels.map(p => h('option', { value: p }, PRIVACY_WORDS[p])));
  const tier = h('select', { id: 'w-tier', name: 'tier' }, h('option', { value: '' }, 'Automatic'),
    tiers.map(t => h('option', { value: t }, TIER_WORDS[t])));
  const importance = h('input', { id: 'w-importance', name: 'importance', type: 'number', min: 0, max: 1, step: 0.1, placeholder: '0.5' });
  const tagsIn = h('input', { id: 'w-tags', name: 'tags', placeholder: 'comma separated' });
  const form = h('form', { class: 'card', id: 'write-form' },
    field('What to remember', text),
    h('div', { class: 'row wrap' }, field('Title', title), field('Kind', kind), field('When it happened', happened)),
    h('div', { class: 'row wrap' }, field('Scene', scene), field('Who may read it', privacy), field('Keep it', tier)),
    h('div', { class: 'row wrap' }, field('Tags', tagsIn), field('Importance (0–1)', importance)),
    h('button', { type: 'submit', id: 'write-go' }, 'Remember'));
  form.addEventListener('submit', async e => {
    e.preventDefault();
    const body = { text: text.value, scene: scene.value, kind: kind.value, tags: splitTags(tagsIn.value), privacy: privacy.value };
    if (title.value.trim()) body.title = title.value.trim();
    if (happened.value.trim()) body.time = happened.value.trim();
    if (tier.value) body.tier = tier.value;
    if (importance.value !== '') body.importance = Number(importance.value);
    try {
      const r = await api.post('/v1/write', body);
      ctx.flash(r.action === 'NOOP' ? 'Already remembered' : 'Remembered');
      ctx.go('#/memory/' + encodeURIComponent(r.id));
    } catch (err) {
      ctx.flash(`${err.code}: ${err.message}`, 'error');
    }
  });
  put(ctx.el, h('h1', null, 'Write'), form);
}

/** Tags typed as a comma-separated list (ASCII or Chinese commas). */
export const splitTags = v => String(v || '').split(/[,，]/).map(t => t.trim()).filter(Boolean);
