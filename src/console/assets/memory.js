// A memory's page (its text, details on demand, edit, tags, forget with
// undo, its versions both ways) and the Forgotten page (what was forgotten
// and may be brought back). What a token may not change is not offered,
// and the page says why.

import { h, put, add, badges, when, relative, headline, memoryLink, confirmButton, sceneName, shownTags,
  langOf, say, field, TIER, STAGE, PRIVACY } from './dom.js';
import * as api from './api.js';
import { writeChoices, TIER_WORDS, splitTags, card } from './find.js';

/** Whether the token may change `m` (its write scenes, and the privacy scopes writing it needs). */
export function mayChange(caps, m) {
  if (!(caps.token.write_scenes || []).includes(m.scene)) return false;
  return writeChoices(caps).privacy.includes(m.privacy);
}

/** Why the token may not change `m`, in words. */
function whyReadOnly(caps, m) {
  const own = (caps.token.write_scenes || []).map(sceneName);
  if (!(caps.token.write_scenes || []).includes(m.scene)) {
    return `You can read this but not change it here: it belongs to ${sceneName(m.scene)}, and this sign-in ` +
      (own.length ? `changes memories only in ${own.join(', ')}.` : 'may not write.') +
      ` Use ${sceneName(m.scene)}'s own token to change it.`;
  }
  return `You can read this but not change it: changing a ${PRIVACY[m.privacy] || m.privacy} memory needs more rights than this sign-in has.`;
}

/** Restores `id` (journaled) and opens what is current afterwards. */
async function restore(ctx, id, what) {
  try {
    const r = await api.post('/v1/restore', { id });
    ctx.flash(what);
    ctx.go('#/memory/' + encodeURIComponent(r.id));
  } catch (err) { ctx.flash(`${err.code}: ${err.message}`, 'error'); }
}

/** The details a person asks for: ids, raw words, times. */
function details(m) {
  const rows = [['Id', m.id], ['Written', when(m.ts)], ['When it happened', m.time], ['Kind', m.kind],
    ['Stage', STAGE[m.stage] ? `${STAGE[m.stage]} (${m.stage})` : m.stage],
    ['Who may read it', `${PRIVACY[m.privacy] || 'Anyone who may read the scene'} (${m.privacy})`],
    ['Keep', m.tier ? `${TIER[m.tier]} (${m.tier})` : null], ['Scene', `${sceneName(m.scene)} (${m.scene})`],
    ['From', m.speaker], ['About', m.subject], ['Source', m.source], ['Importance', m.importance],
    ['Conversation', m.session], ['Expires', m.expires_at ? `${when(m.expires_at)} (${relative(m.expires_at)})` : null]]
    .filter(([, v]) => v !== null && v !== undefined && v !== '');
  return h('details', { class: 'card', id: 'm-details' }, h('summary', null, 'Details'),
    h('dl', { class: 'facts' }, rows.map(([k, v]) => [h('dt', null, k), say('dd', null, String(v))])));
}

/** The tag list; with `retag`, each tag has a remove button. */
function tagList(list, retag) {
  return h('div', { class: 'tags', id: 'm-tags' }, list.map(t => h('span', { class: 'tag', lang: langOf(t) }, t,
    retag ? h('button', { type: 'button', class: 'x', 'aria-label': `Remove tag ${t}`, title: `Remove tag ${t}`,
      onclick: () => retag({ remove: [t] }) }, '×') : null)));
}

/** Edit forms: tags and importance, a new version, forget. */
function editForms(ctx, m, redrawTags) {
  const retag = async change => {
    try {
      const r = await api.post('/v1/tags', { id: m.id, ...change });
      m.tags = r.tags || [];
      redrawTags();
      ctx.flash('Saved');
    } catch (err) { ctx.flash(`${err.code}: ${err.message}`, 'error'); }
  };
  const tagIn = h('input', { id: 'm-tag-add', placeholder: 'comma separated' });
  const imp = h('input', { id: 'm-importance', type: 'number', min: 0, max: 1, step: 0.05, value: m.importance });
  const tf = h('form', { class: 'row wrap', id: 'tags-form' }, field('Add tags', tagIn), field('Importance (0–1)', imp),
    h('button', { type: 'submit' }, 'Save tags'));
  tf.addEventListener('submit', e => {
    e.preventDefault();
    retag({ add: splitTags(tagIn.value), importance: Number(imp.value) });
    tagIn.value = '';
  });
  const edit = h('textarea', { id: 'm-edit', rows: 5, lang: langOf(m.text) });
  edit.value = m.text;
  const { tiers } = writeChoices(ctx.caps);
  const tierChoices = [...new Set([...tiers, m.tier].filter(Boolean))];
  const tier = h('select', { id: 'm-tier' }, tierChoices.map(t => h('option', { value: t, selected: t === m.tier }, TIER_WORDS[t])));
  const ef = h('form', { class: 'card', id: 'edit-form' }, h('h2', null, 'Edit'),
    h('p', { class: 'muted small' }, 'Saving keeps this text as an older version; the new text replaces it everywhere.'),
    field('Text', edit), h('div', { class: 'row wrap' }, field('Keep it', tier), h('button', { type: 'submit', id: 'edit-go' }, 'Save new version')));
  ef.addEventListener('submit', async e => {
    e.preventDefault();
    // The new version keeps every field it does not set (kind, time, subject, speaker, …).
    const next = { text: edit.value, supersedes: m.id };
    if (m.tier && tier.value !== m.tier) next.tier = tier.value;
    try {
      const r = await api.post('/v1/write', next);
      ctx.flash('Saved as a new version');
      ctx.go('#/memory/' + encodeURIComponent(r.id));
    } catch (err) { ctx.flash(`${err.code}: ${err.message}`, 'error'); }
  });
  const reason = h('input', { id: 'forget-reason', placeholder: 'optional, kept in the journal' });
  const forget = confirmButton('Forget…', 'Forget this memory? You can undo it.', 'Yes, forget it', async () => {
    try {
      await api.post('/v1/forget', { id: m.id, reason: reason.value || 'forgotten in the console', scene: m.scene });
      const undo = h('button', { type: 'button', id: 'undo-forget', class: 'secondary' }, 'Undo');
      undo.addEventListener('click', () => restore(ctx, m.id, 'Forget undone'));
      ctx.flash(`Forgotten: “${headline(m, 40)}”.`, 'ok', undo);
      ctx.go('#/timeline');
    } catch (err) { ctx.flash(`${err.code}: ${err.message}`, 'error'); }
  }, { id: 'forget-go', class: 'secondary' });
  const ff = h('div', { class: 'card', id: 'forget-form' }, h('h2', null, 'Forget'), field('Why (optional)', reason), forget);
  return { tf, ef, ff, retag };
}

export async function memory(ctx) {
  const id = ctx.args[0];
  // A document's chunk has its document's page.
  if (/^doc-/.test(id)) return location.replace('#/document/' + encodeURIComponent(id.split('#')[0]));
  const m = await api.post('/v1/get', { id });
  const canChange = mayChange(ctx.caps, m) && !m.superseded;
  const parts = [say('h1', null, headline(m, 80)), h('div', { class: 'meta' }, badges(m), h('time', { datetime: m.ts }, when(m.ts)))];
  if (m.superseded) parts.push(versionNote(ctx, m));
  else if (!mayChange(ctx.caps, m)) parts.push(h('p', { class: 'note', id: 'read-only-note' }, whyReadOnly(ctx.caps, m)));
  parts.push(h('div', { class: 'card' }, say('div', { class: 'text full', id: 'm-text' }, m.text)));
  if ((m.conflicts_with || []).length) parts.push(conflictNote(ctx, m, canChange));
  const tagsBox = h('div');
  parts.push(tagsBox, details(m));
  let forms = null;
  const redraw = () => put(tagsBox, tagList(shownTags(m), forms && forms.retag));
  if (canChange) {
    forms = editForms(ctx, m, redraw);
    parts.push(forms.tf, forms.ef, forms.ff);
  }
  redraw();
  const history = h('section', { id: 'history', 'aria-labelledby': 'history-h' }, h('h2', { id: 'history-h' }, 'Versions'));
  parts.push(history);
  put(ctx.el, parts);
  await versions(m, history);
}

/** The memories this one likely contradicts: which is newer, and dismissing the link. */
function conflictNote(ctx, m, may) {
  const note = h('div', { class: 'card conflict-note', id: 'conflict-note', role: 'note' });
  for (const c of m.conflicts_with) {
    const dismiss = may ? h('button', { type: 'button', class: 'secondary dismiss-conflict', 'data-id': c.id, onclick: async () => {
      try {
        await api.post('/v1/conflicts/dismiss', { id: m.id, other: c.id });
        ctx.flash('Conflict dismissed.', 'ok');
        ctx.go('#/memory/' + encodeURIComponent(m.id));
      } catch (err) { ctx.flash(`${err.code}: ${err.message}`, 'error'); }
    } }, 'Not a conflict') : null;
    add(note, [h('p', { class: 'conflict' }, h('strong', null, 'Conflicts with '), memoryLink(c.id, c.newer ? 'a newer memory' : 'an older memory'),
      ` (${c.newer ? 'this one is older' : 'this one is newer'}${c.reason ? ', ' + c.reason : ''}). `, dismiss)]);
  }
  return note;
}

/** The note on an older version's page: what replaced it, and restoring on purpose. */
function versionNote(ctx, m) {
  const may = mayChange(ctx.caps, m);
  const note = h('div', { class: 'card superseded-note', id: 'superseded-note', role: 'note' });
  if (m.newest) {
    add(note, [h('p', null, h('strong', null, 'An older version. '), 'It was replaced by ',
      h('span', { id: 'newest-link' }, memoryLink(m.newest, 'the current version')), '.')]);
  } else if (m.newest_forgotten) {
    add(note, [h('p', null, h('strong', null, 'An older version. '), 'The newest version (', memoryLink(m.newest_forgotten), ') was forgotten.')]);
    if (may) add(note, [h('button', { type: 'button', id: 'undo-forget-go', onclick: () => restore(ctx, m.newest_forgotten, 'Forget undone') }, 'Undo that forget')]);
  } else {
    add(note, [h('p', null, h('strong', null, 'An older version, '), 'replaced by a newer one this sign-in cannot read.')]);
  }
  if (may) add(note, [' ', h('button', { type: 'button', id: 'restore-go', class: 'secondary', onclick: () => restore(ctx, m.id, 'This version is current again') }, 'Make this version current again')]);
  else add(note, [h('p', { class: 'muted small' }, whyReadOnly(ctx.caps, m))]);
  return note;
}

/** The line of versions around `m`: newer ones (as far as readable) and older ones. */
async function versions(m, box) {
  const list = h('ol', { class: 'history', reversed: true });
  const item = (v, label) => h('li', { class: v.id === m.id ? 'this' : null, 'data-id': v.id },
    h('time', null, when(v.ts)), ' ', v.id === m.id ? h('strong', null, headline(v, 60), ' (this page)') : memoryLink(v.id, headline(v, 60)),
    label ? h('span', { class: 'muted small' }, ' · ', label) : null);
  const newer = [];
  let next = (m.superseded_by || [])[0] || (m.newest && m.newest !== m.id ? m.newest : null);
  for (let n = 0; next && n < 20; n++) {
    let v;
    try { v = await api.post('/v1/get', { id: next }); } catch { break; }
    newer.unshift(item(v, v.superseded ? 'newer' : 'current'));
    next = (v.superseded_by || [])[0];
  }
  const older = [];
  let prev = m.supersedes;
  for (let n = 0; prev && n < 20; n++) {
    let v;
    try { v = await api.post('/v1/get', { id: prev }); } catch { older.push(h('li', null, memoryLink(prev), h('span', { class: 'muted' }, ' (not readable)'))); break; }
    older.push(item(v, 'older'));
    prev = v.supersedes;
  }
  add(list, [newer, item(m, m.superseded ? null : 'current'), older]);
  add(box, newer.length || older.length ? list : h('p', { class: 'muted' }, 'This is the only version.'));
}

export async function forgotten(ctx) {
  const list = h('div', { id: 'forgotten' });
  const more = h('button', { type: 'button', id: 'forgotten-more', class: 'secondary', hidden: true }, 'Older');
  let before;
  const load = async () => {
    const r = await api.post('/v1/forgotten', before ? { limit: 20, before } : { limit: 20 });
    for (const item of r.items) {
      const action = item.restorable
        ? h('button', { type: 'button', class: 'restore', 'data-id': item.id, onclick: () => restore(ctx, item.id, 'Restored') }, 'Restore')
        : h('span', { class: 'muted small' }, `Only ${sceneName(item.scene)}'s own token can restore it.`);
      const c = card(item, [], [h('span', { class: 'muted small' }, 'forgotten ', relative(item.forgotten_at)), action]);
      // A forgotten memory has no page to open: its headline is plain text here.
      const link = c.querySelector('h3 a');
      if (link) link.replaceWith(document.createTextNode(link.textContent));
      list.append(c);
    }
    before = r.next_before;
    more.hidden = !before;
    if (!list.childElementCount) put(list, h('p', { class: 'muted' }, 'Nothing has been forgotten.'));
  };
  more.addEventListener('click', () => load().catch(err => ctx.flash(`${err.code}: ${err.message}`, 'error')));
  put(ctx.el, h('h1', null, 'Forgotten'),
    h('p', { class: 'muted' }, 'Memories that were forgotten. Restoring one brings it back into search and lists.'), list, more);
  await load();
}
