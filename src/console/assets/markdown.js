// A small, safe Markdown renderer: it builds DOM nodes (text stays text, raw
// HTML is shown as written) for a subset: headings, paragraphs, lists,
// block quotes, fenced and inline code, emphasis, rules, and links whose
// URL is http or https.

import { h } from './dom.js';

/** Renders `src` as a DocumentFragment. */
export function renderMarkdown(src) {
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
      frag.append(h('h' + Math.min(6, m[1].length + 1), null, inline(m[2])));
      i++;
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
    if (m.index > 0) frag.append(document.createTextNode(rest.slice(0, m.index)));
    if (m[1]) frag.append(h('code', null, m[2].trim()));
    else if (m[3] || m[4]) frag.append(h('strong', null, inline(m[3] || m[4])));
    else if (m[5] || m[6]) frag.append(h('em', null, inline(m[5] || m[6])));
    else frag.append(link(m[7], m[8], m[0]));
    rest = rest.slice(m.index + m[0].length);
  }
  if (rest) frag.append(document.createTextNode(rest));
  return frag;
}

function link(label, href, raw) {
  let url;
  try { url = new URL(href); } catch { return document.createTextNode(raw); }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return document.createTextNode(raw);
  return h('a', { href: url.href, rel: 'noopener noreferrer nofollow', target: '_blank' }, inline(label));
}
