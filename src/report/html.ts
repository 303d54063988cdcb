import type { ReportDocument, Section, Table } from './document.js';
import type { Thumbnail } from './thumbnails.js';

/**
 * A single self-contained HTML page: inline CSS, plots as inline SVG, no script and no external
 * resource, so it opens offline, archives as one file and prints cleanly.
 */
export interface RenderedPlot {
  id: string;
  title: string;
  svg: string;
}

export function escapeHtml(text: string): string {
  return text.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;').replaceAll('"', '&quot;');
}

/** The two inline marks the document uses (**bold**, `code`), applied after escaping. */
function inline(text: string): string {
  return escapeHtml(text)
    .replace(/\*\*([^*]+)\*\*/g, '<strong>$1</strong>')
    .replace(/`([^`]+)`/g, '<code>$1</code>');
}

function table(t: Table): string {
  const caption = t.caption ? `<caption>${inline(t.caption)}</caption>` : '';
  if (t.rows.length === 0) return `<p class="empty">${t.caption ? `${inline(t.caption)}: ` : ''}no rows</p>`;
  const head = `<tr>${t.columns.map((c) => `<th scope="col">${inline(c)}</th>`).join('')}</tr>`;
  const body = t.rows.map((r) => `<tr>${r.map((c) => `<td>${inline(c)}</td>`).join('')}</tr>`).join('\n');
  const notes = t.notes?.length ? `<p class="notes">${t.notes.map(inline).join(' ')}</p>` : '';
  return `<div class="scroll"><table>${caption}<thead>${head}</thead><tbody>\n${body}\n</tbody></table></div>${notes}`;
}

function section(s: Section, plots: ReadonlyMap<string, RenderedPlot>): string {
  const parts = [
    `<section id="${escapeHtml(s.id)}"${s.kind === 'summary' ? ' class="summary-box"' : ''}>`,
    s.folded ? `<details><summary><h2>${inline(s.title)}</h2></summary>` : `<h2>${inline(s.title)}</h2>`,
  ];
  for (const p of s.paragraphs) parts.push(`<p>${inline(p)}</p>`);
  if (s.list) parts.push(`<ul>${s.list.map((i) => `<li>${inline(i)}</li>`).join('')}</ul>`);
  for (const id of s.plots ?? []) {
    const plot = plots.get(id);
    if (plot)
      parts.push(
        `<figure class="plot" id="plot-${escapeHtml(id)}">${plot.svg}<figcaption>${inline(plot.title)}</figcaption></figure>`,
      );
  }
  const figures = parts.filter((p) => p.startsWith('<figure'));
  if (figures.length > 1) {
    // Several figures of one section side by side where the page is wide enough.
    const first = parts.indexOf(figures[0] as string);
    parts.splice(first, figures.length, `<div class="figures">${figures.join('\n')}</div>`);
  }
  for (const t of s.tables) parts.push(table(t));
  parts.push(s.folded ? '</details></section>' : '</section>');
  return parts.join('\n');
}

const STYLE = `
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1b1b1b; margin: 2rem auto; max-width: 1600px; padding: 0 1rem; }
h1 { font-size: 1.6rem; } h2 { margin-top: 2.2rem; border-bottom: 1px solid #ddd; padding-bottom: .2rem; }
table { border-collapse: collapse; margin: .6rem 0 1.2rem; font-size: 12.5px; }
caption { text-align: left; font-weight: 600; padding: .3rem 0; }
th, td { border: 1px solid #d6d6d6; padding: .25rem .5rem; text-align: left; vertical-align: top; }
th { background: #f3f3f3; } tbody tr:nth-child(even) { background: #fafafa; }
.scroll { overflow-x: auto; } figure.plot { margin: 1rem 0; overflow-x: auto; }
figure.plot svg { display: block; max-width: 100%; height: auto; }
figcaption { font-size: 12px; color: #555; max-width: 760px; } code { font-size: 12px; background: #f3f3f3; padding: 0 .2rem; }
.empty { color: #777; font-style: italic; } li { margin: .2rem 0; }
.thumbs { display: flex; flex-wrap: wrap; gap: .8rem; } figure.thumb { margin: 0; width: 280px; }
figure.thumb img { width: 280px; height: auto; border: 1px solid #ccc; image-rendering: auto; }
details > summary { cursor: pointer; } details > summary h2 { display: inline-block; margin-top: 1.4rem; border: 0; }
.figures { display: flex; flex-wrap: wrap; gap: 0 1.5rem; align-items: flex-start; }
.notes { font-size: 12px; color: #555; margin: -.8rem 0 1.2rem; }
.summary-box { border: 2px solid #2e7d32; border-radius: 6px; background: #f4faf4; padding: .2rem 1.2rem .6rem; margin-top: 1.2rem; }
.summary-box h2 { margin-top: .8rem; border: 0; } .summary-box li { margin: .45rem 0; }
`;

/** An image task's canary images (thumbnails.ts), after the overview. */
function imagesSection(thumbnails: readonly Thumbnail[]): string {
  if (thumbnails.length === 0) return '';
  const figures = thumbnails.map(
    (t) =>
      `<figure class="thumb"><img src="${t.src}" width="${t.width}" height="${t.height}" alt="${escapeHtml(`canary ${t.canary_id}, ${t.label}`)}"><figcaption>${escapeHtml(t.label)} · ${escapeHtml(t.canary_id)} · ${escapeHtml(t.run_id)}</figcaption></figure>`,
  );
  return [
    '<section id="canary-images">',
    '<h2>Canary images</h2>',
    `<p>One canary as training showed it under each visibility of the audit, and its hidden-code probe. Only the source region differs between them.</p>`,
    `<div class="thumbs">${figures.join('\n')}</div>`,
    '</section>',
  ].join('\n');
}

export function renderHtml(
  doc: ReportDocument,
  plots: readonly RenderedPlot[],
  thumbnails: readonly Thumbnail[] = [],
): string {
  const byId = new Map(plots.map((p) => [p.id, p]));
  const images = imagesSection(thumbnails);
  const nav = [
    ...doc.sections.map((s) => `<a href="#${escapeHtml(s.id)}">${inline(s.title)}</a>`),
    ...(images ? ['<a href="#canary-images">Canary images</a>'] : []),
  ].join(' · ');
  return [
    '<!doctype html>',
    '<html lang="en">',
    '<head>',
    '<meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    `<title>${escapeHtml(doc.title)}</title>`,
    `<style>${STYLE}</style>`,
    '</head>',
    '<body>',
    `<h1>${inline(doc.title)}</h1>`,
    `<nav>${nav}</nav>`,
    ...doc.sections.flatMap((s, k) => (k === 0 && images ? [section(s, byId), images] : [section(s, byId)])),
    '</body>',
    '</html>',
    '',
  ].join('\n');
}
