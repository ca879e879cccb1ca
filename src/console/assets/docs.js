// Documents (the Markdown files under memories/: listed, searched and read
// whole, with their tables and heading levels) and categories (read, edit,
// create). Documents are edited as files, so the console offers no tag or
// text edits on them.

import { h, put, add, badges, when, highlight, sceneName, langOf, say, field, shownTags } from './dom.js';
import * as api from './api.js';
import { renderMarkdown } from './markdown.js';

/** One document in the list. */
function docCard(d, extra) {
  return h('article', { class: 'card doc', 'data-id': d.id },
    h('h3', { class: 'headline' }, h('a', { href: '#/document/' + encodeURIComponent(d.id), class: 'mlink', lang: langOf(d.title) }, d.title)),
    h('div', { class: 'meta' }, badges({ ...d, origin: 'doc' }), h('span', { class: 'path' }, d.path), h('time', { datetime: d.ts }, when(d.ts))),
    shownTags(d).length ? h('div', { class: 'tags' }, shownTags(d).map(t => h('span', { class: 'tag' }, t))) : null,
    extra);
}

export async function documents(ctx) {
  const query = ctx.params.get('q') || '';
  const q = h('input', { type: 'search', id: 'doc-q', name: 'q', value: query, placeholder: 'Search in documents…' });
  const form = h('form', { class: 'card row', id: 'doc-form', role: 'search' },
    h('label', { class: 'sr-only', for: 'doc-q' }, 'Search in documents'), q, h('button', { type: 'submit', id: 'doc-go' }, 'Find'),
    query ? h('a', { href: '#/documents', id: 'doc-all' }, 'All documents') : null);
  form.addEventListener('submit', e => { e.preventDefault(); ctx.go(ctx.hashOf('documents', [], { q: q.value.trim() })); });
  const list = h('div', { id: 'documents' });
  put(ctx.el, h('h1', null, query ? `Documents: ${query}` : 'Documents'), form, list);
  if (query) return documentHits(list, query);
  const more = h('button', { type: 'button', id: 'documents-more', class: 'secondary', hidden: true }, 'More documents');
  let after;
  const load = async () => {
    const r = await api.post('/v1/documents', after ? { limit: 50, after } : { limit: 50 });
    for (const d of r.documents) list.append(docCard(d));
    after = r.next_after;
    more.hidden = !after;
    if (!list.childElementCount) put(list, h('p', { class: 'muted' }, 'No documents this sign-in may read.'));
  };
  more.addEventListener('click', () => load().catch(err => ctx.flash(`${err.code}: ${err.message}`, 'error')));
  add(ctx.el, [more]);
  await load();
}

/** Documents whose sections match `query`, one card per document with its best section. */
async function documentHits(list, query) {
  const r = await api.post('/v1/search', { query, kinds: ['doc'], limit: 10 });
  const docs = new Map();
  for (const hit of r.hits) if (!docs.has(hit.doc_id || hit.id)) docs.set(hit.doc_id || hit.id, hit);
  put(list, docs.size ? [...docs.entries()].map(([id, m]) => docCard(
    { id, title: String(m.title || id).split(' › ')[0], path: m.path || '', scene: m.scene, privacy: m.privacy, ts: m.ts, tags: m.tags, kind: m.kind },
    h('div', { class: 'text', lang: langOf(m.text) }, highlight(String(m.text).slice(0, 240), r.terms))))
    : h('p', { class: 'muted' }, 'No document matches.'));
}

export async function documentPage(ctx) {
  const d = await api.post('/v1/document', { id: ctx.args[0] });
  const body = h('div', { class: 'markdown', id: 'm-text', lang: langOf(d.markdown) }, renderMarkdown(d.markdown, { title: d.title }));
  put(ctx.el, say('h1', null, d.title),
    h('div', { class: 'meta' }, badges({ ...d, origin: 'doc' }), h('span', { class: 'path' }, d.path), h('time', { datetime: d.ts }, 'changed ', when(d.ts))),
    d.source === 'index' ? h('p', { class: 'note' }, 'The file changed since it was last read; this is the version memd has indexed.') : null,
    shownTags(d).length ? h('div', { class: 'tags', id: 'm-tags' }, shownTags(d).map(t => h('span', { class: 'tag' }, t))) : null,
    h('article', { class: 'card' }, body),
    h('p', { class: 'muted small' }, 'Documents are Markdown files under memories/; edit the file to change it.'));
}

const SLOTS = [['custom', 'Custom'], ['company-values', 'Company values'], ['architecture', 'Architecture'], ['coding-requirements', 'Coding requirements']];
const slotName = s => (SLOTS.find(x => x[0] === s) || [s, s])[1];

/** The form that creates a category (or, given one, edits it). */
function categoryForm(ctx, c) {
  const scenes = ctx.caps.token.write_scenes || [];
  const name = h('input', { id: 'category-name', name: 'name', required: true, pattern: '[a-z0-9]+(-[a-z0-9]+)*', placeholder: 'e.g. coding-standards', value: c ? c.name : '' });
  const slot = h('select', { id: 'category-slot', name: 'slot' }, SLOTS.map(([v, l]) => h('option', { value: v, selected: c && c.slot === v }, l)));
  const scene = h('select', { id: 'category-scene', name: 'scene' }, scenes.map(s => h('option', { value: s, selected: c && c.scene === s }, sceneName(s))));
  const text = h('textarea', { id: c ? 'category-edit' : 'category-content', rows: 10, required: true });
  text.value = c ? c.content || '' : '';
  const f = h('form', { class: 'card', id: c ? 'category-edit-form' : 'category-new-form' },
    h('h2', null, c ? 'Edit' : 'New category'),
    c ? null : h('div', { class: 'row wrap' }, field('Name', name), field('Kind', slot), field('Scene', scene)),
    field('Content (Markdown)', text), h('button', { type: 'submit', id: c ? 'category-save' : 'category-create' }, c ? 'Save' : 'Create'));
  f.addEventListener('submit', async e => {
    e.preventDefault();
    const body = c ? { action: 'set', name: c.name, slot: c.slot, scene: c.scene, content: text.value }
      : { action: 'set', name: name.value.trim(), slot: slot.value, scene: scene.value, content: text.value };
    try {
      await api.post('/v1/categories', body);
      ctx.flash(c ? 'Saved' : 'Created');
      ctx.go('#/categories/' + encodeURIComponent(body.name));
      if (c) categories(ctx);
    } catch (err) { ctx.flash(`${err.code}: ${err.message}`, 'error'); }
  });
  return f;
}

export async function categories(ctx) {
  const [name] = ctx.args;
  const canWrite = (ctx.caps.token.write_scenes || []).length > 0;
  if (name) {
    const r = await api.post('/v1/categories', { action: 'get', name });
    const c = r.category || r;
    const parts = [say('h1', null, c.name),
      h('div', { class: 'meta' }, h('span', { class: 'badge' }, slotName(c.slot)), h('span', { class: 'badge b-scene' }, sceneName(c.scene)), h('time', null, when(c.updated_at))),
      h('div', { class: 'card markdown', id: 'category-text', lang: langOf(c.content) }, renderMarkdown(c.content || ''))];
    if ((ctx.caps.token.write_scenes || []).includes(c.scene)) parts.push(categoryForm(ctx, c));
    if ((c.revisions || []).length) parts.push(h('p', { class: 'muted small' }, `${c.revisions.length} earlier revision${c.revisions.length === 1 ? '' : 's'} kept.`));
    put(ctx.el, parts);
    return;
  }
  const r = await api.post('/v1/categories', { action: 'list' });
  const list = (r.categories || []).map(c => h('article', { class: 'card' },
    h('h3', { class: 'headline' }, h('a', { href: '#/categories/' + encodeURIComponent(c.name) }, c.name)),
    h('div', { class: 'meta' }, h('span', { class: 'badge' }, slotName(c.slot)), h('span', { class: 'badge b-scene' }, sceneName(c.scene)), h('time', null, when(c.updated_at))),
    c.preview ? say('div', { class: 'text' }, c.preview) : null));
  put(ctx.el, h('h1', null, 'Categories'),
    h('p', { class: 'muted' }, 'Standing instructions every agent session starts with.'),
    h('div', { id: 'categories' }, list.length ? list : h('p', { class: 'muted' }, 'No categories yet.')),
    canWrite ? categoryForm(ctx, null) : null);
}
