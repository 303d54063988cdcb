import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse, stringify } from 'yaml';

/**
 * docs/benchmarks.md is generated from the records in bench/results/: one Markdown file per
 * measurement, with a YAML header saying what was measured, when, and by which command; the body
 * holds the figures (tables as the bench printed them) and what they mean. A bench that measures
 * writes its record with `writeRecord` (its `--record` flag); `npm run docs:update` rebuilds the page
 * and the fast tier fails when the page and the records disagree (`test/docs-generated.test.ts`).
 *
 * A record's command must name a file that exists in the repository (its bench script, `.ci/run`,
 * ...), so a figure cannot outlive the script that produced it.
 */
export interface BenchRecord {
  /** The file name in bench/results/ without `.md`; sorts records of one date. */
  slug: string;
  title: string;
  /** YYYY-MM-DD, the day the figures were measured. */
  date: string;
  /** The command that produced the figures, as run from the repository root. */
  command: string;
  /** `measurement` (the default) or `history` (figures kept verbatim, not re-measured; listed last). */
  kind: 'measurement' | 'history';
  /** Markdown: the figures and what they mean. */
  body: string;
}

const ROOT = fileURLToPath(new URL('..', import.meta.url));
export const RESULTS_DIR = join(ROOT, 'bench', 'results');

const HEADER_KEYS = ['title', 'date', 'command', 'kind'] as const;

/** One record file's text: `---` YAML header `---`, then the body. */
export function formatRecord(record: BenchRecord): string {
  const header = stringify(
    { title: record.title, date: record.date, command: record.command, kind: record.kind },
    { lineWidth: 0 },
  );
  return `---\n${header}---\n\n${record.body.trim()}\n`;
}

/** Parse one record file; every problem names the file and the fix. */
export function parseRecord(slug: string, text: string, file = `bench/results/${slug}.md`): BenchRecord {
  const m = /^---\n([\s\S]*?)\n---\n([\s\S]*)$/.exec(text);
  if (m === null) throw new Error(`${file}: no YAML header; start the file with --- title/date/command --- lines`);
  const header = parse(m[1] as string) as Record<string, unknown> | null;
  if (header === null || typeof header !== 'object') throw new Error(`${file}: the header is not a YAML mapping`);
  for (const key of Object.keys(header)) {
    if (!(HEADER_KEYS as readonly string[]).includes(key)) {
      throw new Error(`${file}: unknown header key ${JSON.stringify(key)}; keys: ${HEADER_KEYS.join(', ')}`);
    }
  }
  const text_ = (key: string): string => {
    const v = header[key];
    if (typeof v !== 'string' || v.trim() === '') throw new Error(`${file}: header needs ${key}: <text>`);
    return v;
  };
  const date = text_('date');
  if (!/^\d{4}-\d{2}-\d{2}$/.test(date)) throw new Error(`${file}: date ${JSON.stringify(date)} is not YYYY-MM-DD`);
  const kind = header.kind ?? 'measurement';
  if (kind !== 'measurement' && kind !== 'history') {
    throw new Error(`${file}: kind must be measurement or history, not ${JSON.stringify(kind)}`);
  }
  return { slug, title: text_('title'), date, command: text_('command'), kind, body: (m[2] as string).trim() };
}

/** Every record in `dir`, parsed. */
export function readRecords(dir = RESULTS_DIR): BenchRecord[] {
  return readdirSync(dir)
    .filter((n) => n.endsWith('.md'))
    .sort()
    .map((n) => parseRecord(n.slice(0, -3), readFileSync(join(dir, n), 'utf8'), `bench/results/${n}`));
}

/** Write (or replace) one record; returns its path. */
export function writeRecord(record: BenchRecord, dir = RESULTS_DIR): string {
  const path = join(dir, `${record.slug}.md`);
  writeFileSync(path, formatRecord(record));
  return path;
}

/** The date of today in UTC, YYYY-MM-DD, for a record measured now. */
export function today(): string {
  return new Date().toISOString().slice(0, 10);
}

/** The anchor GitHub gives a heading. */
function slugOf(heading: string): string {
  return heading
    .trim()
    .replace(/`/g, '')
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

/**
 * docs/benchmarks.md from the records: newest measurements first (same date: by slug), history last,
 * with an index table. Records' relative links are written for docs/ (the page's folder).
 */
export function benchmarksPage(records: readonly BenchRecord[]): string {
  const ordered = [...records].sort((a, b) => {
    if (a.kind !== b.kind) return a.kind === 'history' ? 1 : -1;
    return a.date === b.date ? a.slug.localeCompare(b.slug) : b.date.localeCompare(a.date);
  });
  const heading = (r: BenchRecord): string => (r.kind === 'history' ? `History: ${r.title}` : `${r.date}: ${r.title}`);
  const lines = [
    '# Benchmarks',
    '',
    '<!-- Generated from bench/results/*.md by `npm run docs:update`; edit the records there. -->',
    '',
    'Reference. Dated measurements, each with the command that made it; one record per measurement',
    'in `bench/results/`, which the benches write (`--record`) and this page is generated from.',
    'Absolute times on the development machine (2 cores, often shared with other jobs) vary about 2x',
    'from one run to the next; ratios measured side by side in the same run are the figures to',
    'compare. History records keep figures as they were quoted, not re-measured.',
    '',
    '| measured | what | command |',
    '|---|---|---|',
    ...ordered.map(
      (r) =>
        `| ${r.kind === 'history' ? `to ${r.date}` : r.date} | [${r.title.replace(/\|/g, '\\|')}](#${slugOf(heading(r))}) | \`${r.command.split('\n')[0]?.replace(/\|/g, '\\|')}\` |`,
    ),
  ];
  for (const r of ordered) {
    lines.push('', `## ${heading(r)}`, '', '```', r.command, '```', '', r.body);
  }
  return `${lines.join('\n')}\n`;
}

/** The scripts and grids a command names, which must exist: `bench/x.ts`, `.ci/run`, `configs/y.yaml` (not a venv's binaries). */
export function commandFiles(command: string): string[] {
  return [...command.matchAll(/(?:^|[\s=])((?:bench|\.ci|configs|trainer-py|test)\/[\w./-]+)/g)]
    .map((m) => m[1] as string)
    .filter((f) => f.startsWith('.ci/') || /\.(ts|mts|js|mjs|py|sh|ya?ml)$/.test(f)); // not venv binaries
}
