// Service pages: consolidation (runs, run now or try a dry run, reports in
// words, roll back), health (sizes and times in plain units, a request
// chart), settings (named in words, the key on demand) and tokens (the one
// signed in with is marked; revoking it signs out).

import { h, put, add, when, relative, table, confirmButton, bytes, duration, sceneName, memoryLink, say, STAGE, TIER, PRIVACY } from './dom.js';
import * as api from './api.js';

const SVG = 'http://www.w3.org/2000/svg';
const svg = (tag, attrs, ...kids) => {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  for (const k of kids) el.append(k instanceof Node ? k : document.createTextNode(String(k)));
  return el;
};
const show = v => (v === null || v === undefined ? '—' : typeof v === 'object' ? JSON.stringify(v) : String(v));

// What each part of a consolidation report is called.
const REPORT_PARTS = [
  ['promoted', 'Kept from chat'], ['folded', 'Merged duplicates'], ['written', 'Written'],
  ['superseded', 'Replaced'], ['forgotten', 'Forgotten'], ['rejected', 'Refused'],
  ['skipped', 'Left alone'], ['stale', 'Looks out of date'], ['accepted', 'Model suggestions applied'],
];

/** One item of a report in words: its text or id, and its reason. */
function reportItem(item) {
  if (typeof item === 'string') return h('li', null, /^(fact|doc)-/.test(item) ? memoryLink(item) : item);
  if (!item || typeof item !== 'object') return h('li', null, show(item));
  const text = item.text || item.after || item.content || item.title || item.summary;
  const id = item.id || item.new_id || item.into || item.target;
  const why = item.reason || item.why || item.because;
  return h('li', null, text ? say('span', null, String(text)) : null, id ? [' ', memoryLink(id, text ? '(open)' : id)] : null,
    why ? h('span', { class: 'muted small' }, ' — ', String(why)) : null,
    !text && !id && !why ? h('span', { class: 'muted small' }, show(item)) : null);
}

/** A report as sections in words; the raw report on demand. */
function reportView(r) {
  const counts = REPORT_PARTS.map(([k, label]) => [label, Array.isArray(r[k]) ? r[k].length : r[k]]).filter(([, n]) => n !== undefined);
  return [
    h('p', null, r.dry_run ? h('strong', null, 'A dry run: nothing was changed. ') : null,
      r.started ? `Ran ${when(r.started)}` : null, r.expiring !== undefined ? ` · ${r.expiring} chat line${r.expiring === 1 ? '' : 's'} left to fade` : null),
    r.model_error ? h('p', { class: 'note' }, 'The model pass did not run: ', String(r.model_error)) : null,
    table(counts.map(([k, n]) => [k, String(n)]), ['What', 'How many'], 'counts'),
    REPORT_PARTS.filter(([k]) => Array.isArray(r[k]) && r[k].length).map(([k, label]) =>
      h('section', { class: 'card' }, h('h3', null, `${label} (${r[k].length})`), h('ul', null, r[k].slice(0, 100).map(reportItem)))),
    h('details', { class: 'card' }, h('summary', null, 'The whole report (technical)'), h('pre', null, JSON.stringify(r, null, 2))),
  ];
}

async function consolidationRun(ctx, run) {
  const r = await api.post('/v1/consolidation/report', { run });
  const out = h('div', { id: 'rollback-result', 'aria-live': 'polite' });
  const dry = h('button', { type: 'button', id: 'rollback-dry', class: 'secondary' }, 'Preview rollback');
  dry.addEventListener('click', async () => {
    try { put(out, h('h2', null, 'What a rollback would do'), reportView(await api.post('/v1/consolidation/rollback', { run, dry_run: true }))); }
    catch (err) { put(out, h('p', { class: 'error' }, err.code, ': ', err.message)); }
  });
  const real = confirmButton('Roll back…', 'Undo everything this run did?', 'Yes, roll back', async () => {
    try { put(out, h('h2', null, 'Rolled back'), reportView(await api.post('/v1/consolidation/rollback', { run }))); ctx.flash('Rolled back'); }
    catch (err) { put(out, h('p', { class: 'error' }, err.code, ': ', err.message)); }
  }, { id: 'rollback-go', class: 'secondary' });
  put(ctx.el, h('h1', null, 'Consolidation run'), h('p', { class: 'muted small' }, run), reportView(r),
    h('div', { class: 'row wrap' }, dry, real), out);
}

export async function consolidation(ctx) {
  const [run] = ctx.args;
  if (run) return consolidationRun(ctx, run);
  const r = await api.get('/v1/consolidation/runs');
  const out = h('div', { id: 'run-result', 'aria-live': 'polite' });
  const start = async dryRun => {
    put(out, h('p', { class: 'muted' }, dryRun ? 'Trying…' : 'Running…'));
    try {
      const rep = await api.post('/v1/consolidation/run', dryRun ? { dry_run: true } : {});
      put(out, h('h2', null, dryRun ? 'Dry run: what a run would do now' : 'Done'), reportView(rep));
      if (!dryRun) ctx.flash('Consolidation ran');
    } catch (err) { put(out, h('p', { class: 'error' }, err.code, ': ', err.message)); }
  };
  const runs = (r.runs || []).map(s => h('article', { class: 'card run' },
    h('h3', { class: 'headline' }, h('a', { href: '#/consolidation/' + encodeURIComponent(s.run) }, `Run of ${when(s.started)}`)),
    s.rolled_back ? h('p', null, h('span', { class: 'badge b-warn' }, 'rolled back ' + when(s.rolled_back))) : null,
    h('p', { class: 'small' }, `${s.promoted} kept from chat · ${s.folded} merged · ${s.written} written · ${s.forgotten} forgotten · ${s.rejected} refused · ${s.stale} look out of date`)));
  put(ctx.el, h('h1', null, 'Consolidation'),
    h('p', { class: 'muted' }, 'Each night memd keeps what matters from recent chat and tidies duplicates. You can run it now, or try a dry run that changes nothing.'),
    h('div', { class: 'row wrap' },
      h('button', { type: 'button', id: 'run-dry', class: 'secondary', onclick: () => start(true) }, 'Dry run'),
      confirmButton('Run now…', 'Run consolidation now?', 'Yes, run it', () => start(false), { id: 'run-go' })),
    out, h('h2', null, 'Past runs'),
    h('div', { id: 'runs' }, runs.length ? runs : h('p', { class: 'muted', id: 'no-runs' }, 'No runs yet.')));
}

/** Requests per route from the Prometheus text of /metrics, as a bar chart. */
function chart(metrics) {
  const byRoute = new Map();
  for (const line of String(metrics).split('\n')) {
    const m = /^memd_http_requests_total\{route="([^"]*)",status="(\d+)"\}\s+(\d+)/.exec(line);
    if (m) byRoute.set(m[1], (byRoute.get(m[1]) || 0) + Number(m[3]));
  }
  const rows = [...byRoute.entries()].sort((a, b) => b[1] - a[1]).slice(0, 10);
  if (!rows.length) return h('p', { class: 'muted' }, 'No requests counted yet.');
  const max = Math.max(...rows.map(r => r[1]));
  const H = 22, W = 320;
  const g = svg('svg', { viewBox: `0 0 ${W} ${rows.length * H}`, class: 'chart', role: 'img', 'aria-label': 'requests per route: ' + rows.map(([k, n]) => `${k} ${n}`).join(', ') });
  rows.forEach(([route, n], i) => {
    const w = Math.max(2, (n / max) * (W - 190));
    g.append(svg('rect', { x: 150, y: i * H + 4, width: w, height: H - 8, rx: 3, class: 'bar' }),
      svg('text', { x: 146, y: i * H + H / 2 + 4, 'text-anchor': 'end', class: 'label' }, route.replace(/^(GET|POST) \/v1\//, '')),
      svg('text', { x: 154 + w, y: i * H + H / 2 + 4, class: 'label' }, n));
  });
  return g;
}

const COUNT_NAMES = { by_stage: ['By stage', STAGE], by_scene: ['By scene', null], by_privacy: ['By privacy', { normal: 'Anyone in the scene', ...PRIVACY }], by_tier: ['By tier', { ...TIER, none: 'No tier (chat, documents)' }] };

/** Byte counts and seconds in a component's detail, in plain units. */
const plainDetail = d => String(d || '').replace(/(\d+) bytes/g, (_, n) => bytes(n)).replace(/(\d+) ?s\b/g, (_, n) => duration(n));

export async function health(ctx) {
  const hl = await api.get('/v1/health');
  let metrics = null;
  try { metrics = await api.get('/metrics'); } catch { /* a token without the metrics right still sees health */ }
  const ok = hl.status === 'ok';
  const comps = Object.entries(hl.components || {}).map(([k, c]) => [k, h('span', { class: 'badge b-status-' + (c.status === 'ok' ? 'ok' : 'bad') }, c.status === 'ok' ? 'working' : c.status), plainDetail(c.detail)]);
  const counts = Object.entries(hl.counts || {}).map(([k, v]) => {
    const [title, words] = COUNT_NAMES[k] || [k.replace(/_/g, ' '), null];
    const name = a => (k === 'by_scene' ? sceneName(a) : (words && words[a]) || a);
    return h('div', { class: 'card' }, h('h3', null, title), table(Object.entries(v).sort((a, b) => b[1] - a[1]).map(([a, b]) => [name(a), String(b)]), null, title));
  });
  const jobs = Object.entries(hl.jobs || {}).map(([k, j]) => [k, j.last_success ? `${when(j.last_success)} (${relative(j.last_success)})` : 'never',
    j.next_run ? `${when(j.next_run)} (${relative(j.next_run)})` : show(j.next), String(j.failures || 0)]);
  put(ctx.el, h('h1', null, 'Health'),
    h('p', { id: 'health-status', class: 'badge b-status-' + (ok ? 'ok' : 'bad') }, ok ? 'Everything is working' : 'Something needs attention'),
    table([['Version', hl.version], ['Running for', duration(hl.uptime_s)], ['Memories you can search', show(hl.memories)],
      ['Facts', show(hl.facts)], ['Documents', show(hl.documents)], ['Searchable by meaning', show(hl.vectors)],
      ['Waiting to be searchable by meaning', show(hl.pending_vectors)], ['Problems found', show(hl.issues)],
      ['This process writes', hl.writer ? 'yes' : 'no (read only)']], null, 'summary'),
    h('h2', null, 'Parts'), table(comps, ['Part', 'State', 'Detail'], 'parts'),
    h('h2', null, 'Counts'), h('div', { class: 'grid' }, counts),
    jobs.length ? [h('h2', null, 'Scheduled jobs'), table(jobs, ['Job', 'Last success', 'Next', 'Failures'], 'jobs')] : null,
    h('h2', null, 'Requests'), metrics === null ? h('p', { class: 'muted' }, 'The request chart needs an admin sign-in.') : chart(metrics));
}

/** A setting's key in words: `search.defaultLimit` is "Search: default limit". */
const keyWords = key => key.split('.').map(p => p.replace(/([a-z])([A-Z])/g, '$1 $2').toLowerCase())
  .map((p, i) => (i === 0 ? p.charAt(0).toUpperCase() + p.slice(1) : p)).join(': ');

export async function settings(ctx) {
  const [schema, state] = await Promise.all([api.get('/v1/config-schema'), api.get('/v1/config-state')]);
  const editable = schema['x-editable'] || {};
  const inputs = Object.entries(editable).map(([key, s]) => {
    const input = h('input', { type: 'number', name: key, id: 'set-' + key.replace(/[^a-z0-9]/gi, '-'), min: s.minimum, max: s.maximum, step: 1, value: show(state.values[key]) });
    return [key, input, h('label', { class: 'setting' }, h('span', { class: 'label' }, keyWords(key)),
      h('span', { class: 'muted small' }, s.description, ` (${s.minimum}–${s.maximum})`), input,
      h('span', { class: 'muted small key' }, 'config key: ', h('code', null, key)))];
  });
  const form = h('form', { class: 'card', id: 'settings-form' }, inputs.map(i => i[2]), h('button', { type: 'submit' }, 'Save'));
  form.addEventListener('submit', async e => {
    e.preventDefault();
    const change = {};
    for (const [key, input] of inputs) if (String(state.values[key]) !== input.value) change[key] = Number(input.value);
    if (!Object.keys(change).length) return ctx.flash('Nothing changed');
    try { const r = await api.post('/v1/config', change); Object.assign(state.values, r.values); ctx.flash('Saved'); }
    catch (err) { ctx.flash(`${err.code}: ${err.message}`, 'error'); }
  });
  put(ctx.el, h('h1', null, 'Settings'), h('p', { class: 'muted' }, 'Settings that take effect without a restart.'), form,
    h('details', { class: 'card' }, h('summary', null, 'The full configuration schema (technical)'), h('pre', null, JSON.stringify(schema, null, 2))));
}

/** One token's card; revoking the signed-in token signs out. */
function tokenCard(ctx, t, reload) {
  const me = t.name === ctx.caps.token.name;
  const revoke = async () => {
    try {
      await api.post('/v1/tokens/revoke', { name: t.name });
    } catch (err) { return ctx.flash(`${err.code}: ${err.message}`, 'error'); }
    if (me) { api.token.clear(); return ctx.signin(`You revoked "${t.name}", the token you were signed in with. Sign in with another token.`); }
    ctx.flash('Revoked ' + t.name);
    await reload();
  };
  return h('article', { class: 'card token' + (me ? ' me' : ''), 'data-name': t.name },
    h('div', { class: 'row spread' }, h('h3', { class: 'headline' }, t.name),
      me ? h('span', { class: 'badge b-me', id: 'token-me' }, 'You are signed in with this token') : null,
      t.revoked_at ? h('span', { class: 'badge b-status-bad' }, 'revoked ' + when(t.revoked_at))
        : confirmButton('Revoke…', me ? 'Revoke the token you are signed in with? You will be signed out.' : `Revoke ${t.name}? Anything using it stops working.`,
          'Yes, revoke', revoke, { class: 'revoke secondary', 'data-name': t.name, id: 'revoke-' + t.name.replace(/[^a-z0-9-]/gi, '-') + '-go' })),
    h('dl', { class: 'facts' },
      h('dt', null, 'Can'), h('dd', null, (t.scopes || []).join(', ')),
      h('dt', null, 'Scenes'), h('dd', null, (t.scenes || []).map(sceneName).join(', ')),
      t.preset ? [h('dt', null, 'Made from'), h('dd', null, t.preset)] : null,
      h('dt', null, 'Issued'), h('dd', null, when(t.created_at))));
}

export async function tokens(ctx) {
  const box = h('div', { id: 'tokens' });
  const reload = async () => {
    let r;
    try { r = await api.get('/v1/tokens'); } catch (err) {
      if (err.status === 401) { api.token.clear(); return ctx.signin('The token was revoked or is unknown.'); }
      return put(box, h('p', { class: 'error' }, err.code, ': ', err.message));
    }
    put(box, r.tokens.map(t => tokenCard(ctx, t, reload)));
  };
  put(ctx.el, h('h1', null, 'Tokens'), box,
    h('p', { class: 'muted small' }, 'New tokens are issued with memd token issue on the machine (the secret is shown once).'));
  await reload();
  add(ctx.el, []);
}
