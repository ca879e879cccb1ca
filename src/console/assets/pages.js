// Memory pages: search, write, timeline, a memory's page, the short-term
// inbox, documents and categories. Memory text is untrusted: it only ever
// reaches the page as Text nodes (or through the safe Markdown renderer).

import { h, put, add, badges, highlight, when, headline, memoryLink, confirmButton } from './dom.js';
import * as api from './api.js';
import { renderMarkdown } from './markdown.js';

const writeScenes = caps => caps.token.write_scenes || caps.token.scenes || [];
const tags = v => String(v || '').split(/[,，]/).map(t => t.trim()).filter(Boolean);

/** One memory in a list: badges, headline link, text with highlighted terms. */
function card(m, terms, extra) {
  return h('article', { class: 'card memory', 'data-id': m.id },
    h('div', { class: 'meta' }, badges(m), h('time', { datetime: m.ts }, when(m.ts))),
    h('div', { class: 'text' }, highlight(String(m.text || '').slice(0, 600), terms)),
    h('div', { class: 'foot' },
      memoryLink(m.id, 'open'),
      (m.tags || []).length ? h('span', { class: 'tags' }, m.tags.map(t => h('span', { class: 'tag' }, t))) : null,
      extra));
}

/** Scenes the token may read: its own, and for an all-scenes ('*') token every scene with memories. */
async function readableScenes(caps) {
  const scenes = [...(caps.token.scenes || [])];
  if ((caps.token.scopes || []).includes('*')) {
    try {
      const hl = await api.get('/v1/health');
      for (const s of Object.keys((hl.counts && hl.counts.by_scene) || {})) if (!scenes.includes(s)) scenes.push(s);
    } catch { /* the token's own scenes are enough to search */ }
  }
  return scenes;
}

export async function search(ctx) {
  const scenes = await readableScenes(ctx.caps);
  const q = h('input', { type: 'search', id: 'q', name: 'q', placeholder: 'Search memories…', required: true, lang: 'zh' });
  const mode = h('select', { id: 'mode', name: 'mode' }, ['fulltext', 'hybrid', 'semantic'].map(m => h('option', { value: m }, m)));
  const boxes = scenes.map(s => h('label', { class: 'check' }, h('input', { type: 'checkbox', name: 'scene', value: s, checked: true, id: 'scene-' + s.replace(/[^a-z0-9-]/gi, '-') }), s));
  const results = h('div', { id: 'results' });
  const form = h('form', { class: 'card', id: 'search-form' },
    h('div', { class: 'row' }, q, mode, h('button', { type: 'submit', id: 'search-go' }, 'Search')),
    boxes.length > 1 ? h('fieldset', { class: 'scenes' }, h('legend', null, 'Scenes'), boxes) : null);
  form.addEventListener('submit', async e => {
    e.preventDefault();
    const chosen = boxes.map(b => b.querySelector('input')).filter(i => i.checked).map(i => i.value);
    const body = { query: q.value, mode: mode.value };
    if (boxes.length > 1 && chosen.length < scenes.length) body.scenes = chosen;
    put(results, h('p', { class: 'muted' }, 'Searching…'));
    try {
      const r = await api.post('/v1/search', body);
      put(results,
        h('p', { class: 'muted', id: 'result-count' }, `${r.hits.length} result${r.hits.length === 1 ? '' : 's'}`, r.mode ? ` · ${r.mode}` : ''),
        r.fallback ? h('p', { class: 'muted small' }, r.fallback) : null,
        r.hits.map(hit => card(hit, r.terms, h('span', { class: 'muted small' }, `score ${Number(hit.score).toFixed(3)} · ${hit.pass}`))));
    } catch (err) {
      put(results, h('p', { class: 'error' }, err.code, ': ', err.message));
    }
  });
  put(ctx.el, h('h1', null, 'Search'), form, results);
  q.focus();
}

export async function write(ctx) {
  const scenes = writeScenes(ctx.caps);
  const text = h('textarea', { id: 'w-text', name: 'text', rows: 5, required: true, lang: 'zh', placeholder: 'What should memd remember?' });
  const scene = h('select', { id: 'w-scene', name: 'scene' }, scenes.map(s => h('option', { value: s }, s)));
  const tagsIn = h('input', { id: 'w-tags', name: 'tags', placeholder: 'tags, comma separated' });
  const privacy = h('select', { id: 'w-privacy', name: 'privacy' }, h('option', { value: '' }, 'privacy: default'),
    ['normal', 'personal', 'sensitive', 'secret'].map(p => h('option', { value: p }, p)));
  const tier = h('select', { id: 'w-tier', name: 'tier' }, h('option', { value: '' }, 'tier: automatic'),
    ['t0', 't1', 't2', 't3'].map(t => h('option', { value: t }, t)));
  const importance = h('input', { id: 'w-importance', name: 'importance', type: 'number', min: 0, max: 1, step: 0.1, placeholder: 'importance 0–1' });
  const form = h('form', { class: 'card', id: 'write-form' },
    text, h('div', { class: 'row wrap' }, scene, privacy, tier, importance), tagsIn,
    h('button', { type: 'submit', id: 'write-go' }, 'Remember'));
  form.addEventListener('submit', async e => {
    e.preventDefault();
    const body = { text: text.value, scene: scene.value, tags: tags(tagsIn.value) };
    if (privacy.value) body.privacy = privacy.value;
    if (tier.value) body.tier = tier.value;
    if (importance.value !== '') body.importance = Number(importance.value);
    try {
      const r = await api.post('/v1/write', body);
      ctx.flash(`${r.action}: ${r.id}`);
      ctx.go('#/memory/' + encodeURIComponent(r.id));
    } catch (err) {
      ctx.flash(`${err.code}: ${err.message}`, 'error');
    }
  });
  put(ctx.el, h('h1', null, 'Write'), scenes.length ? form : h('p', { class: 'muted' }, 'This token may not write.'));
}

export async function timeline(ctx) {
  const list = h('div', { id: 'timeline' });
  const more = h('button', { type: 'button', id: 'older' }, 'Older');
  let before;
  const months = new Map();
  const load = async () => {
    const r = await api.post('/v1/timeline', before ? { limit: 50, before } : { limit: 50 });
    for (const month of r.months) {
      let sec = months.get(month.month);
      if (!sec) {
        sec = h('section', { class: 'month' }, h('h2', null, month.month));
        months.set(month.month, sec);
        list.append(sec);
      }
      for (const m of month.items) {
        const chain = [];
        if (m.supersedes) chain.push(h('span', { class: 'chain' }, 'replaces ', memoryLink(m.supersedes, headline({ id: m.supersedes }, 12))));
        for (const next of m.superseded_by || []) chain.push(h('span', { class: 'chain' }, 'superseded by ', memoryLink(next)));
        if (m.superseded && !(m.superseded_by || []).length) chain.push(h('span', { class: 'chain muted' }, 'replaced by a newer version'));
        const c = card(m, [], chain);
        if (m.superseded || (m.superseded_by || []).length) c.classList.add('superseded');
        sec.append(c);
      }
    }
    before = r.next_before;
    more.hidden = !before;
    if (!months.size) put(list, h('p', { class: 'muted' }, 'Nothing yet.'));
  };
  more.addEventListener('click', () => load().catch(err => ctx.flash(err.message, 'error')));
  put(ctx.el, h('h1', null, 'Timeline'), list, more);
  await load();
}

export async function memory(ctx) {
  const id = ctx.args[0];
  const m = await api.post('/v1/get', { id });
  const mayWrite = writeScenes(ctx.caps).includes(m.scene);
  // An older version is history: it is not edited or forgotten, it can be restored.
  const canWrite = mayWrite && !m.superseded;
  const body = m.origin === 'doc' ? await documentBody(m) : h('div', { class: 'text full', id: 'm-text' }, m.text);
  const facts = h('dl', { class: 'facts' },
    [['id', m.id], ['time', when(m.ts)], ['kind', m.kind], ['subject', m.subject], ['source', m.source],
      ['importance', m.importance], ['expires', m.expires_at ? when(m.expires_at) : null], ['path', m.path]]
      .filter(([, v]) => v !== null && v !== undefined && v !== '')
      .map(([k, v]) => [h('dt', null, k), h('dd', null, String(v))]));
  const tagList = h('div', { class: 'tags', id: 'm-tags' });
  const drawTags = list => put(tagList, list.map(t => h('span', { class: 'tag' }, t,
    canWrite ? h('button', { type: 'button', class: 'x', title: 'remove tag', onclick: () => retag({ remove: [t] }) }, '×') : null)));
  const retag = async change => {
    try {
      const r = await api.post('/v1/tags', { id: m.id, ...change });
      drawTags(r.tags || []);
      ctx.flash('Saved');
    } catch (err) { ctx.flash(`${err.code}: ${err.message}`, 'error'); }
  };
  drawTags(m.tags || []);
  const parts = [h('h1', null, headline(m, 60)), h('div', { class: 'meta' }, badges(m))];
  if (m.superseded) parts.push(versionNote(ctx, m, mayWrite));
  parts.push(h('div', { class: 'card' }, body), facts, tagList);
  if (canWrite && m.origin !== 'doc') {
    const tagIn = h('input', { id: 'm-tag-add', placeholder: 'add tags' });
    const imp = h('input', { id: 'm-importance', type: 'number', min: 0, max: 1, step: 0.05, value: m.importance });
    const tf = h('form', { class: 'row wrap', id: 'tags-form' }, tagIn, imp, h('button', { type: 'submit' }, 'Save tags'));
    tf.addEventListener('submit', e => {
      e.preventDefault();
      retag({ add: tags(tagIn.value), importance: Number(imp.value) });
      tagIn.value = '';
    });
    const edit = h('textarea', { id: 'm-edit', rows: 5, lang: 'zh' });
    edit.value = m.text;
    const tier = h('select', { id: 'm-tier' }, ['t0', 't1', 't2', 't3'].map(t => h('option', { value: t, selected: t === m.tier }, t)));
    const ef = h('form', { class: 'card', id: 'edit-form' }, h('h2', null, 'Edit (a new version supersedes this one)'), edit,
      h('div', { class: 'row' }, tier, h('button', { type: 'submit', id: 'edit-go' }, 'Save new version')));
    ef.addEventListener('submit', async e => {
      e.preventDefault();
      // The new version keeps every field it does not set (kind, time, subject, speaker, …).
      const next = { text: edit.value, supersedes: m.id };
      if (tier.value !== m.tier) next.tier = tier.value;
      try {
        const r = await api.post('/v1/write', next);
        ctx.flash(`${r.action}: ${r.id}`);
        ctx.go('#/memory/' + encodeURIComponent(r.id));
      } catch (err) { ctx.flash(`${err.code}: ${err.message}`, 'error'); }
    });
    const reason = h('input', { id: 'forget-reason', placeholder: 'reason (kept in the journal)' });
    const forget = confirmButton('Forget', 'Really forget?', async () => {
      try {
        await api.post('/v1/forget', { id: m.id, reason: reason.value || 'forgotten in the console', scene: m.scene });
        ctx.flash('Forgotten: ' + m.id);
        ctx.go('#/timeline');
      } catch (err) { ctx.flash(`${err.code}: ${err.message}`, 'error'); }
    }, { id: 'forget-go' });
    parts.push(tf, ef, h('div', { class: 'card row', id: 'forget-form' }, reason, forget));
  }
  const history = h('section', { id: 'history' }, h('h2', null, 'History'));
  parts.push(history);
  put(ctx.el, parts);
  // Older versions: follow `supersedes` as far as the token may read.
  let prev = m.supersedes;
  const list = h('ol', { class: 'history' });
  for (let n = 0; prev && n < 20; n++) {
    let older;
    try { older = await api.post('/v1/get', { id: prev }); } catch { list.append(h('li', null, memoryLink(prev), h('span', { class: 'muted' }, ' (not readable)'))); break; }
    list.append(h('li', null, h('time', null, when(older.ts)), ' ', memoryLink(older.id, headline(older, 60))));
    prev = older.supersedes;
  }
  add(history, list.childElementCount ? list : h('p', { class: 'muted' }, 'No earlier version.'));
}

/** The note on an older version's page: what replaced it, and restoring on purpose. */
function versionNote(ctx, m, mayWrite) {
  const restore = async (target, what) => {
    try {
      const r = await api.post('/v1/restore', { id: target });
      ctx.flash(`${what}: ${r.action} ${r.id}`);
      ctx.go('#/memory/' + encodeURIComponent(r.id));
    } catch (err) { ctx.flash(`${err.code}: ${err.message}`, 'error'); }
  };
  const note = h('div', { class: 'card superseded', id: 'superseded-note' });
  if (m.newest) {
    add(note, [h('p', null, 'An older version. The newest: ', h('span', { id: 'newest-link' }, memoryLink(m.newest)))]);
  } else if (m.newest_forgotten) {
    add(note, [h('p', null, 'An older version; the newest (', memoryLink(m.newest_forgotten), ') was forgotten.')]);
    if (mayWrite) add(note, [h('button', { type: 'button', id: 'undo-forget-go', onclick: () => restore(m.newest_forgotten, 'Forget undone') }, 'Undo that forget')]);
  } else {
    add(note, [h('p', null, 'An older version, replaced by a newer one.')]);
  }
  if (mayWrite) add(note, [h('button', { type: 'button', id: 'restore-go', onclick: () => restore(m.id, 'Restored') }, 'Restore this version')]);
  return note;
}

export async function inbox(ctx) {
  const r = await api.post('/v1/recent', { stage: 'short', limit: 50 });
  const canWrite = writeScenes(ctx.caps);
  const items = r.items.map(m => {
    const keep = canWrite.includes(m.scene) ? h('button', { type: 'button', class: 'keep' }, 'Keep now') : null;
    keep?.addEventListener('click', async () => {
      keep.disabled = true;
      try {
        // The kept memory keeps the line's speaker, title, session and tags.
        const w = await api.post('/v1/write', { text: m.text, supersedes: m.id, stage: 'long' });
        ctx.flash(`Kept as ${w.id}`);
        keep.closest('article').classList.add('superseded');
        keep.replaceWith(memoryLink(w.id, 'kept'));
      } catch (err) { keep.disabled = false; ctx.flash(`${err.code}: ${err.message}`, 'error'); }
    });
    return card(m, [], [m.expires_at ? h('span', { class: 'muted small' }, 'expires ', when(m.expires_at)) : null, keep]);
  });
  put(ctx.el, h('h1', null, 'Inbox'), h('p', { class: 'muted' }, 'Short-term chat memories. They expire unless kept or promoted.'),
    h('div', { id: 'inbox' }, items.length ? items : h('p', { class: 'muted' }, 'The inbox is empty.')));
}

export async function documents(ctx) {
  // Documents are the Markdown files under memories/; the API finds them by search (kind "doc").
  const q = h('input', { type: 'search', id: 'doc-q', placeholder: 'Search documents…', required: true, lang: 'zh' });
  const list = h('div', { id: 'documents' }, h('p', { class: 'muted' }, 'Search the Markdown documents this token may read.'));
  const form = h('form', { class: 'card row', id: 'doc-form' }, q, h('button', { type: 'submit', id: 'doc-go' }, 'Find'));
  form.addEventListener('submit', async e => {
    e.preventDefault();
    try {
      const r = await api.post('/v1/search', { query: q.value, kinds: ['doc'] });
      const docs = new Map();
      for (const hit of r.hits) if (!docs.has(hit.doc_id || hit.id)) docs.set(hit.doc_id || hit.id, hit);
      put(list, docs.size ? [...docs.entries()].map(([docId, m]) => h('article', { class: 'card' },
        h('div', { class: 'meta' }, badges(m)), memoryLink(docId, String(m.title || docId).split(' › ')[0]),
        h('div', { class: 'muted small' }, m.path || ''), h('div', { class: 'text' }, highlight(String(m.text).slice(0, 240), r.terms))))
        : h('p', { class: 'muted' }, 'No document matches.'));
    } catch (err) { put(list, h('p', { class: 'error' }, err.code, ': ', err.message)); }
  });
  put(ctx.el, h('h1', null, 'Documents'), form, list);
  q.focus();
}

/** A whole document: each chunk under its heading, the text through the safe Markdown renderer. */
async function documentBody(m) {
  const out = h('div', { class: 'markdown', id: 'm-text' });
  if (m.id !== m.doc_id) { out.append(renderMarkdown(m.text)); return out; }
  for (let i = 0; i < 500; i++) {
    let c;
    try { c = await api.post('/v1/get', { id: `${m.doc_id}#${i}` }); } catch { break; }
    const heading = String(c.title || '').split(' › ').pop();
    const lines = String(c.text).split('\n');
    if (heading && lines[0].trim() === heading.trim()) lines.shift();
    if (heading) out.append(h(i === 0 ? 'h2' : 'h3', null, heading));
    out.append(renderMarkdown(lines.join('\n')));
  }
  if (!out.childElementCount) out.append(renderMarkdown(m.text));
  return out;
}

export async function categories(ctx) {
  const [name] = ctx.args;
  if (name) {
    const r = await api.post('/v1/categories', { action: 'get', name });
    const c = r.category || r;
    const parts = [h('h1', null, c.name), h('div', { class: 'meta' }, h('span', { class: 'badge' }, c.slot), h('span', { class: 'badge' }, c.scene), h('time', null, when(c.updated_at))),
      h('div', { class: 'card markdown', id: 'category-text' }, renderMarkdown(c.content || ''))];
    if (writeScenes(ctx.caps).includes(c.scene)) {
      const text = h('textarea', { id: 'category-edit', rows: 10 });
      text.value = c.content || '';
      const f = h('form', { class: 'card' }, h('h2', null, 'Edit'), text, h('button', { type: 'submit' }, 'Save'));
      f.addEventListener('submit', async e => {
        e.preventDefault();
        try {
          await api.post('/v1/categories', { action: 'set', name: c.name, slot: c.slot, scene: c.scene, content: text.value });
          ctx.flash('Saved');
          categories(ctx);
        } catch (err) { ctx.flash(`${err.code}: ${err.message}`, 'error'); }
      });
      parts.push(f);
    }
    if ((c.revisions || []).length) parts.push(h('p', { class: 'muted small' }, `${c.revisions.length} earlier revision(s) kept.`));
    put(ctx.el, parts);
    return;
  }
  const r = await api.post('/v1/categories', { action: 'list' });
  const list = (r.categories || []).map(c => h('article', { class: 'card' },
    h('div', { class: 'meta' }, h('span', { class: 'badge' }, c.slot), h('span', { class: 'badge b-scene' }, c.scene), h('time', null, when(c.updated_at))),
    h('a', { href: '#/categories/' + encodeURIComponent(c.name) }, c.name),
    c.preview ? h('div', { class: 'text' }, c.preview) : null));
  put(ctx.el, h('h1', null, 'Categories'), h('div', { id: 'categories' }, list.length ? list : h('p', { class: 'muted' }, 'No categories.')));
}
