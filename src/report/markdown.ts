import type { ReportDocument, Table } from './document.js';

/** GitHub-flavoured Markdown: one heading per section, pipe tables, figures with their n. */
function cell(text: string): string {
  // A pipe or newline inside a cell would break the table row.
  return text.replaceAll('|', '\\|').replaceAll('\n', ' ');
}

function table(t: Table): string[] {
  const lines: string[] = [];
  if (t.caption) lines.push(`**${t.caption}**`, '');
  if (t.rows.length === 0) {
    lines.push('_(no rows)_');
    return lines;
  }
  lines.push(`| ${t.columns.map(cell).join(' | ')} |`);
  lines.push(`|${t.columns.map(() => '---').join('|')}|`);
  for (const row of t.rows) lines.push(`| ${row.map(cell).join(' | ')} |`);
  if (t.notes?.length) lines.push('', `_${t.notes.join(' ')}_`);
  return lines;
}

export function renderMarkdown(doc: ReportDocument): string {
  const lines: string[] = [`# ${doc.title}`, ''];
  for (const section of doc.sections) {
    lines.push(`## ${section.title}`, '');
    for (const p of section.paragraphs) lines.push(p, '');
    if (section.list) {
      for (const item of section.list) lines.push(`- ${item.replaceAll('\n', ' ')}`);
      lines.push('');
    }
    for (const t of section.tables) lines.push(...table(t), '');
  }
  return `${lines.join('\n').trimEnd()}\n`;
}
