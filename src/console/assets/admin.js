// Service pages: consolidation runs, health with a metrics chart, settings
// from /v1/config-schema, and tokens (admin).

import { h, put, when, table, confirmButton } from './dom.js';
import * as api from './api.js';

const SVG = 'http://www.w3.org/2000/svg';
const svg = (tag, attrs, ...kids) => {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  for (const k of kids) el.append(k instanceof Node ? k : document.createTextNode(String(k)));
  return el;
};
const show = v => (v === null || v === undefined ? '—' : typeof v === 'object' ? JSON.stringify(v) : String(v));

export async function consolidation(ctx) {
  const [run] = ctx.args;
  if (run) {
    const r = await api.post('/v1/consolidation/report', { run });
    const counts = Object.entries(r).filter(([, v]) => typeof v !== 'object' || v === null);
    const lists = Object.entries(r).filter(([, v]) => v && typeof v === 'object');
    const out = h('div', { id: 'rollback-result' });
    const dry = h('button', { type: 'button', id: 'rollback-dry' }, 'Preview rollback');
    dry.addEventListener('click', async () => {
      try { put(out, h('pre', null, JSON.stringify(await api.post('/v1/consolidation/rollback', { run, dry_run: true }), null, 2))); }
      catch (err) { put(out, h('p', { class: 'error' }, err.code, ': ', err.message)); }
    });
    const real = confirmButton('Roll back', 'Really roll back?', async () => {
      try { put(out, h('pre', null, JSON.stringify(await api.post('/v1/consolidation/rollback', { run }), null, 2))); ctx.flash('Rolled back'); }
      catch (err) { put(out, h('p', { class: 'error' }, err.code, ': ', err.message)); }
    }, { id: 'rollback-go' });
    put(ctx.el, h('h1', null, 'Run ', run), table(counts.map(([k, v]) => [k, show(v)])),
      lists.map(([k, v]) => h('details', { class: 'card' }, h('summary', null, `${k} (${Array.isArray(v) ? v.length : Object.keys(v).length})`),
        h('pre', null, JSON.stringify(v, null, 2)))),
      h('div', { class: 'row' }, dry, real), out);
    return;
  }
  const r = await api.get('/v1/consolidation/runs');
  const runs = (r.runs || []).map(s => h('article', { class: 'card run' },
    h('div', { class: 'meta' }, h('time', null, when(s.started)), s.rolled_back ? h('span', { class: 'badge b-warn' }, 'rolled back ' + when(s.rolled_back)) : null),
    h('a', { href: '#/consolidation/' + encodeURIComponent(s.run) }, s.run),
    h('div', { class: 'small' }, `${s.promoted} promoted · ${s.folded} folded · ${s.written} written · ${s.forgotten} forgotten · ${s.rejected} rejected · ${s.stale} stale`)));
  put(ctx.el, h('h1', null, 'Consolidation'),
    h('div', { id: 'runs' }, runs.length ? runs : h('p', { class: 'muted', id: 'no-runs' }, 'No consolidation runs yet.')));
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
  const g = svg('svg', { viewBox: `0 0 ${W} ${rows.length * H}`, class: 'chart', role: 'img', 'aria-label': 'requests per route' });
  rows.forEach(([route, n], i) => {
    const w = Math.max(2, (n / max) * (W - 190));
    g.append(svg('rect', { x: 150, y: i * H + 4, width: w, height: H - 8, rx: 3, class: 'bar' }),
      svg('text', { x: 146, y: i * H + H / 2 + 4, 'text-anchor': 'end', class: 'label' }, route.replace(/^(GET|POST) \/v1\//, '')),
      svg('text', { x: 154 + w, y: i * H + H / 2 + 4, class: 'label' }, n));
  });
  return g;
}

export async function health(ctx) {
  const hl = await api.get('/v1/health');
  let metrics = null;
  try { metrics = await api.get('/metrics'); } catch { /* a token without the metrics right still sees health */ }
  const comps = Object.entries(hl.components || {}).map(([k, c]) => [k, h('span', { class: 'badge b-status-' + (c.status === 'ok' ? 'ok' : 'bad') }, c.status), c.detail]);
  const counts = Object.entries(hl.counts || {}).map(([k, v]) => h('div', { class: 'card' }, h('h3', null, k.replace(/_/g, ' ')),
    table(Object.entries(v).map(([a, b]) => [a, String(b)]))));
  const jobs = Object.entries(hl.jobs || {}).map(([k, j]) => [k, when(j.last_success) || '—', j.next_run ? when(j.next_run) : show(j.next), show(j.failures)]);
  put(ctx.el, h('h1', null, 'Health ', h('span', { id: 'health-status', class: 'badge b-status-' + (hl.status === 'ok' ? 'ok' : 'bad') }, hl.status)),
    table([['version', hl.version], ['writer', show(hl.writer)], ['uptime', hl.uptime_s + ' s'], ['memories', show(hl.memories)],
      ['facts', show(hl.facts)], ['documents', show(hl.documents)], ['vectors', show(hl.vectors)],
      ['pending vectors', show(hl.pending_vectors)], ['issues', show(hl.issues)]]),
    h('h2', null, 'Components'), table(comps),
    h('h2', null, 'Counts'), h('div', { class: 'grid' }, counts),
    jobs.length ? [h('h2', null, 'Jobs'), table(jobs, ['job', 'last success', 'next', 'failures'])] : null,
    h('h2', null, 'Requests'), metrics === null ? h('p', { class: 'muted' }, 'Metrics need a token with more rights.') : chart(metrics));
}

export async function settings(ctx) {
  const [schema, state] = await Promise.all([api.get('/v1/config-schema'), api.get('/v1/config-state')]);
  const editable = schema['x-editable'] || {};
  const inputs = Object.entries(editable).map(([key, s]) => {
    const input = h('input', { type: 'number', name: key, min: s.minimum, max: s.maximum, step: 1, value: show(state.values[key]) });
    return [key, input, h('label', { class: 'setting' }, h('code', null, key), h('span', { class: 'muted small' }, s.description, ` (${s.minimum}–${s.maximum})`), input)];
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
  put(ctx.el, h('h1', null, 'Settings'), h('p', { class: 'muted' }, schema.title || ''), form,
    h('details', { class: 'card' }, h('summary', null, 'Full configuration schema'), h('pre', null, JSON.stringify(schema, null, 2))));
}

export async function tokens(ctx) {
  const r = await api.get('/v1/tokens');
  const cards = r.tokens.map(t => h('article', { class: 'card token', 'data-name': t.name },
    h('div', { class: 'row spread' }, h('strong', null, t.name), t.preset ? h('span', { class: 'badge' }, t.preset) : null,
      t.revoked_at ? h('span', { class: 'badge b-status-bad' }, 'revoked ' + when(t.revoked_at))
        : confirmButton('Revoke', 'Really revoke?', async () => {
          try { await api.post('/v1/tokens/revoke', { name: t.name }); ctx.flash('Revoked ' + t.name); tokens(ctx); }
          catch (err) { ctx.flash(`${err.code}: ${err.message}`, 'error'); }
        }, { class: 'revoke', 'data-name': t.name })),
    h('dl', { class: 'facts' },
      h('dt', null, 'scopes'), h('dd', null, (t.scopes || []).join(' ')),
      h('dt', null, 'scenes'), h('dd', null, (t.scenes || []).join(' ')),
      h('dt', null, 'created'), h('dd', null, when(t.created_at)))));
  put(ctx.el, h('h1', null, 'Tokens'), h('div', { id: 'tokens' }, cards),
    h('p', { class: 'muted small' }, 'New tokens are issued with memd token issue on the machine (secrets are shown once).'));
}
