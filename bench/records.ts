import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join, relative } from 'node:path';
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

/**
 * A bench's `--record SLUG`: everything the bench prints on stdout is kept, and when the process
 * exits it becomes the record `bench/results/<date>-SLUG.md` (today's date), with the command as run
 * (`--record` left out), the machine (cores, load average at the start, Node) and the commit. The
 * record's body is the output as printed; what it means is written under it by hand before the page
 * is regenerated (`npm run docs:update`).
 */
export function recordStdout(slug: string, title: string, argv: readonly string[] = process.argv): void {
  if (!/^[a-z0-9][a-z0-9-]*$/.test(slug)) {
    console.error(`--record: ${JSON.stringify(slug)} is not a record name; use lower-case letters, digits and -`);
    process.exit(2);
  }
  const script = relative(ROOT, argv[1] ?? '');
  const args: string[] = [];
  for (let i = 2; i < argv.length; i += 1) {
    const a = argv[i] as string;
    if (a === '--record') i += 1;
    else if (!a.startsWith('--record=')) args.push(/^[\w./,=:-]+$/.test(a) ? a : `'${a.replace(/'/g, `'\\''`)}'`);
  }
  const command = ['npx tsx', script, ...args].join(' ');
  const date = today();
  const load = loadavg().map((x) => x.toFixed(1));
  let commit = 'unknown';
  try {
    commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).trim();
    const dirty = execFileSync('git', ['status', '--porcelain'], { cwd: ROOT, encoding: 'utf8' }).trim() !== '';
    if (dirty) commit += ' with uncommitted changes';
  } catch {
    // not a git checkout: the commit stays unknown
  }
  const chunks: string[] = [];
  const write = process.stdout.write.bind(process.stdout);
  process.stdout.write = ((chunk: string | Uint8Array, ...rest: unknown[]): boolean => {
    chunks.push(typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8'));
    return (write as (c: string | Uint8Array, ...r: unknown[]) => boolean)(chunk, ...rest);
  }) as typeof process.stdout.write;
  process.on('exit', (code) => {
    if (code !== 0 && code !== 1) return; // a crash or bad flags: nothing measured
    const body = [
      `One run of the command at commit \`${commit}\`, on ${cpus().length} cores (load average ${load.join(', ')} at the start), Node ${process.version.slice(1)}.`,
      '',
      '```',
      chunks.join('').trimEnd(),
      '```',
    ].join('\n');
    const path = writeRecord({ slug: `${date}-${slug}`, title, date, command, kind: 'measurement', body });
    process.stderr.write(`record written: ${relative(ROOT, path)} (npm run docs:update rebuilds docs/benchmarks.md)\n`);
  });
}
