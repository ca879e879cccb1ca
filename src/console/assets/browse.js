// Browsing: the timeline (filters and a month jump, kept in the URL) and
// the inbox of recent chat. Browsing never writes; keeping a chat line is a
// button press, offered only where the token may write, and the page says
// why the others cannot be kept here.

import { h, put, add, memoryLink, headline, relative, sceneName, field } from './dom.js';
import * as api from './api.js';
import { card, readableScenes } from './find.js';
import { mayChange } from './memory.js';

const STAGES = [['', 'Everything'], ['long', 'Memories'], ['short', 'Chat']];

/** The timeline's filter form; changing a filter puts it into the URL. */
function timelineFilters(ctx, scenes, state) {
  const scene = h('select', { id: 'tl-scene', name: 'scene' }, h('option', { value: '' }, 'All scenes'),
    scenes.map(s => h('option', { value: s, selected: s === state.scene }, sceneName(s))));
  const stage = h('select', { id: 'tl-stage', name: 'stage' }, STAGES.map(([v, l]) => h('option', { value: v, selected: v === state.stage }, l)));
  const month = h('input', { type: 'month', id: 'tl-month', name: 'month', value: state.month, placeholder: 'YYYY-MM' });
  const form = h('form', { class: 'card row wrap', id: 'timeline-filters' },
    field('Scene', scene), field('Show', stage), field('Jump to month', month),
    h('button', { type: 'submit', id: 'tl-go' }, 'Show'),
    state.month ? h('a', { href: ctx.hashOf('timeline', [], { scene: state.scene, stage: state.stage }), id: 'tl-all' }, 'All months') : null);
  const apply = e => {
    if (e) e.preventDefault();
    ctx.go(ctx.hashOf('timeline', [], { scene: scene.value, stage: stage.value, month: month.value }));
  };
  form.addEventListener('submit', apply);
  scene.addEventListener('change', apply);
  stage.addEventListener('change', apply);
  return form;
}

/** The chain links of a timeline entry: what it replaces and what replaced it. */
function chain(m) {
  const out = [];
  if (m.supersedes) out.push(h('span', { class: 'chain' }, 'replaces ', memoryLink(m.supersedes, 'an older version')));
  for (const next of m.superseded_by || []) out.push(h('span', { class: 'chain' }, 'replaced by ', memoryLink(next, 'a newer version')));
  if (m.superseded && !(m.superseded_by || []).length) out.push(h('span', { class: 'chain' }, 'replaced by a newer version'));
  return out;
}

export async function timeline(ctx) {
  const scenes = await readableScenes(ctx.caps);
  const p = ctx.params;
  const state = { scene: scenes.includes(p.get('scene')) ? p.get('scene') : '', stage: p.get('stage') || '', month: p.get('month') || '' };
  const list = h('div', { id: 'timeline' });
  const more = h('button', { type: 'button', id: 'older', class: 'secondary', hidden: true }, 'Older');
  const base = { limit: 50 };
  if (state.scene) base.scenes = [state.scene];
  if (state.stage) base.stage = state.stage;
  if (/^\d{4}-\d{2}$/.test(state.month)) base.month = state.month;
  let before;
  const months = new Map();
  const load = async () => {
    const r = await api.post('/v1/timeline', before ? { ...base, before } : base);
    for (const month of r.months) {
      let sec = months.get(month.month);
      if (!sec) {
        const label = new Date(month.month + '-01T00:00:00Z').toLocaleDateString(undefined, { year: 'numeric', month: 'long', timeZone: 'UTC' });
        sec = h('section', { class: 'month', 'data-month': month.month }, h('h2', null, label));
        months.set(month.month, sec);
        list.append(sec);
      }
      for (const m of month.items) {
        const c = card(m, [], chain(m));
        if (m.superseded || (m.superseded_by || []).length) {
          c.classList.add('superseded');
          c.querySelector('.meta').prepend(h('span', { class: 'badge b-old' }, 'older version'));
        }
        sec.append(c);
      }
    }
    before = r.next_before;
    more.hidden = !before;
    if (!months.size) put(list, h('p', { class: 'muted' }, state.month ? 'Nothing in that month.' : 'Nothing yet.'));
  };
  more.addEventListener('click', () => load().catch(err => ctx.flash(`${err.code}: ${err.message}`, 'error')));
  put(ctx.el, h('h1', null, 'Timeline'), timelineFilters(ctx, scenes, state), list, more);
  await load();
}

export async function inbox(ctx) {
  const r = await api.post('/v1/recent', { stage: 'short', limit: 50 });
  const readOnly = new Set();
  const items = r.items.map(m => {
    let action = null;
    if (mayChange(ctx.caps, m)) {
      const keep = h('button', { type: 'button', class: 'keep', 'aria-label': `Keep now: ${headline(m, 40)}` }, 'Keep now');
      keep.addEventListener('click', async () => {
        keep.disabled = true;
        try {
          // The kept memory keeps the line's speaker, title, session and tags.
          const w = await api.post('/v1/write', { text: m.text, supersedes: m.id, stage: 'long' });
          ctx.flash('Kept as a memory');
          keep.closest('article').classList.add('kept');
          keep.replaceWith(memoryLink(w.id, 'Kept: open the memory'));
        } catch (err) { keep.disabled = false; ctx.flash(`${err.code}: ${err.message}`, 'error'); }
      });
      action = keep;
    } else {
      readOnly.add(m.scene);
      action = h('span', { class: 'muted small read-only' }, 'read only here');
    }
    const fades = m.expires_at ? h('span', { class: 'muted small' }, 'fades ', relative(m.expires_at)) : null;
    return card(m, [], [fades, action]);
  });
  const own = (ctx.caps.token.write_scenes || []).map(sceneName);
  const why = readOnly.size
    ? h('p', { class: 'note', id: 'inbox-why' }, `Chat from ${[...readOnly].map(sceneName).sort().join(', ')} can be read but not kept here: `,
      own.length ? `this sign-in keeps memories only in ${own.join(', ')}. ` : 'this sign-in may not write. ',
      'That scene\u2019s own token can keep them, or nightly consolidation keeps what matters.')
    : null;
  put(ctx.el, h('h1', null, 'Inbox'),
    h('p', { class: 'muted' }, 'Recent chat. It fades after a while unless it is kept, or consolidation keeps it.'),
    why, h('div', { id: 'inbox' }, items.length ? items : h('p', { class: 'muted' }, 'The inbox is empty.')));
  add(ctx.el, []);
}
