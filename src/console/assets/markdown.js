// A small, safe Markdown renderer: it builds DOM nodes (text stays text, raw
// HTML is shown as written) for a subset: headings (one level below the
// page's own heading), paragraphs, lists, block quotes, tables, fenced and
// inline code, emphasis, rules, and links whose URL is http or https.

import { h, add } from './dom.js';

/** A table row's cells: `| a | b |` or `a | b`, with `\|` kept as a pipe. */
function cells(line) {
  const t = line.trim().replace(/^\|/, '').replace(/(?<!\\)\|$/, '');
  return t.split(/(?<!\\)\|/).map(c => c.trim().replace(/\\\|/g, '|'));
}

const DELIMITER = /^\s*\|?\s*:?-{1,}:?\s*(\|\s*:?-{1,}:?\s*)*\|?\s*$/;

/** Whether `lines[i]` starts a table: a row with a pipe, then a delimiter row. */
function isTable(lines, i) {
  return lines[i].includes('|') && i + 1 < lines.length && DELIMITER.test(lines[i + 1]) && lines[i + 1].includes('-');
}

/** The table starting at `lines[i]`; returns [element, next line]. */
function table(lines, i) {
  const head = cells(lines[i]);
  const align = cells(lines[i + 1]).map(c => (c.startsWith(':') && c.endsWith(':') ? 'center' : c.endsWith(':') ? 'right' : null));
  const rows = [];
  i += 2;
  while (i < lines.length && lines[i].trim() && lines[i].includes('|')) rows.push(cells(lines[i++]));
  const cell = (tag, text, n) => h(tag, { class: align[n] ? 'align-' + align[n] : null, scope: tag === 'th' ? 'col' : null }, inline(text));
  const el = h('div', { class: 'scroll', tabindex: 0, role: 'region', 'aria-label': 'table: ' + head.join(', ').slice(0, 60) },
    h('table', { class: 'md' },
      h('thead', null, h('tr', null, head.map((c, n) => cell('th', c, n)))),
      h('tbody', null, rows.map(r => h('tr', null, head.map((_, n) => cell('td', r[n] || '', n)))))));
  return [el, i];
}

/** Renders `src` as a DocumentFragment; a first heading equal to `opts.title` is left out (the page shows it). */
export function renderMarkdown(src, opts = {}) {
  const frag = document.createDocumentFragment();
  let lines = String(src || '').replace(/\r\n?/g, '\n').split('\n');
  // YAML front matter is metadata, not prose.
  if (lines[0] === '---') {
    const end = lines.indexOf('---', 1);
    if (end > 0) lines = lines.slice(end + 1);
  }
  let i = 0;
  let para = [];
  const flush = () => {
    if (para.length) frag.append(h('p', null, inline(para.join(' '))));
    para = [];
  };
  while (i < lines.length) {
    const line = lines[i];
    let m;
    if (/^\s*```/.test(line)) {
      flush();
      const code = [];
      i++;
      while (i < lines.length && !/^\s*```/.test(lines[i])) code.push(lines[i++]);
      i++;
      frag.append(h('pre', null, h('code', null, code.join('\n'))));
      continue;
    }
    if (!line.trim()) { flush(); i++; continue; }
    if ((m = /^(#{1,6})\s+(.*?)\s*#*\s*$/.exec(line))) {
      flush();
      const first = !frag.childNodes.length;
      if (!(first && opts.title && m[2].trim() === String(opts.title).trim())) {
        frag.append(h('h' + Math.min(6, m[1].length + 1), null, inline(m[2])));
      }
      i++;
      continue;
    }
    if (isTable(lines, i)) {
      flush();
      const [el, next] = table(lines, i);
      frag.append(el);
      i = next;
      continue;
    }
    if (/^\s{0,3}([-*_])(\s*\1){2,}\s*$/.test(line)) { flush(); frag.append(h('hr')); i++; continue; }
    if (/^\s*>/.test(line)) {
      flush();
      const quote = [];
      while (i < lines.length && /^\s*>/.test(lines[i])) quote.push(lines[i++].replace(/^\s*>\s?/, ''));
      frag.append(h('blockquote', null, renderMarkdown(quote.join('\n'))));
      continue;
    }
    const bullet = /^\s*[-*+]\s+(.*)$/, number = /^\s*\d+[.)]\s+(.*)$/;
    if (bullet.test(line) || number.test(line)) {
      flush();
      const kind = bullet.test(line) ? bullet : number;
      const list = h(kind === bullet ? 'ul' : 'ol');
      while (i < lines.length && kind.test(lines[i])) {
        let item = kind.exec(lines[i++])[1];
        // Continuation lines (indented, not a new item) belong to the item.
        while (i < lines.length && /^\s{2,}\S/.test(lines[i]) && !kind.test(lines[i])) item += ' ' + lines[i++].trim();
        list.append(h('li', null, inline(item.replace(/^\[( |x)\]\s+/i, (_, c) => (c === ' ' ? '☐ ' : '☑ ')))));
      }
      frag.append(list);
      continue;
    }
    para.push(line.trim());
    i++;
  }
  flush();
  return frag;
}

const INLINE = /(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)|\*\*([^*]+?)\*\*|(?<![\w])__([^_]+?)__(?![\w])|\*([^*\s][^*]*?)\*|(?<![\w])_([^_\s][^_]*?)_(?![\w])|\[([^\]]+)\]\(([^)\s]+)(?:\s+"[^"]*")?\)/;

/** Inline Markdown as nodes. */
export function inline(text) {
  const frag = document.createDocumentFragment();
  let rest = String(text);
  for (let guard = 0; rest && guard < 10000; guard++) {
    const m = INLINE.exec(rest);
    if (!m) break;
    if (m.index > 0) add(frag, rest.slice(0, m.index));
    if (m[1]) frag.append(h('code', null, m[2].trim()));
    else if (m[3] || m[4]) frag.append(h('strong', null, inline(m[3] || m[4])));
    else if (m[5] || m[6]) frag.append(h('em', null, inline(m[5] || m[6])));
    else frag.append(link(m[7], m[8], m[0]));
    rest = rest.slice(m.index + m[0].length);
  }
  if (rest) add(frag, rest);
  return frag;
}

function link(label, href, raw) {
  let url;
  try { url = new URL(href); } catch { return add(document.createDocumentFragment(), raw); }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return add(document.createDocumentFragment(), raw);
  return h('a', { href: url.href, rel: 'noopener noreferrer nofollow', target: '_blank' }, inline(label));
}
