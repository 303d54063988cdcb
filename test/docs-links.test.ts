import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * Every relative link and image in README.md, CHANGELOG.md and docs/*.md resolves to a file in the
 * repository, and every `#anchor` to a heading of its target page (GitHub's slugs). External links
 * (a scheme such as https: or mailto:) are not fetched. Fenced code blocks and inline code are not
 * Markdown links and are skipped.
 */

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** The text of a Markdown file with fenced code blocks blanked and inline code removed, line by line. */
function proseLines(text: string): string[] {
  let fence: string | null = null;
  return text.split('\n').map((line) => {
    const marker = /^\s{0,3}(`{3,}|~{3,})/.exec(line)?.[1];
    if (fence !== null) {
      if (marker !== undefined && marker[0] === fence[0] && marker.length >= fence.length) fence = null;
      return '';
    }
    if (marker !== undefined) {
      fence = marker;
      return '';
    }
    return line.replace(/(`+)[^`]*?\1/g, '');
  });
}

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens. */
function slug(heading: string): string {
  return heading
    .trim()
    .replace(/`/g, '')
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

/** The anchors of a Markdown text's headings (a repeated heading gets -1, -2, … as on GitHub). */
function anchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  let fence = false;
  for (const line of text.split('\n')) {
    if (/^\s{0,3}(`{3,}|~{3,})/.test(line)) fence = !fence;
    if (fence) continue;
    const h = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)?.[1];
    if (h === undefined) continue;
    const base = slug(h);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

interface Link {
  line: number;
  target: string;
}

/** Inline links and images `[text](target)` / `![alt](target "title")` outside code. */
function links(text: string): Link[] {
  const out: Link[] = [];
  // Joined so that a link whose text wraps onto the next line is still found.
  const joined = proseLines(text).join('\n');
  const lineOf = (offset: number): number => joined.slice(0, offset).split('\n').length;
  const re = /\]\(\s*(<[^>]*>|[^\s)]*)(?:\s+"[^"]*")?\s*\)/g;
  for (let m = re.exec(joined); m !== null; m = re.exec(joined)) {
    const target = (m[1] ?? '').replace(/^<|>$/g, '');
    out.push({ line: lineOf(m.index), target });
  }
  return out;
}

/** The links of `file` (absolute) that do not resolve, as `file:line: target — why`. */
function brokenLinks(file: string, repoRoot: string): string[] {
  const read = (path: string): string => readFileSync(path, 'utf8');
  const problems: string[] = [];
  const rel = relative(repoRoot, file);
  for (const { line, target } of links(read(file))) {
    if (target === '' || /^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // external: not fetched
    const hash = target.indexOf('#');
    const pathPart = decodeURIComponent(hash === -1 ? target : target.slice(0, hash));
    const anchor = hash === -1 ? null : target.slice(hash + 1);
    const dest = pathPart === '' ? file : resolve(dirname(file), pathPart);
    if (dest !== repoRoot && !dest.startsWith(repoRoot + sep)) {
      problems.push(`${rel}:${line}: ${target} — points outside the repository`);
      continue;
    }
    if (!existsSync(dest)) {
      problems.push(`${rel}:${line}: ${target} — no such file ${relative(repoRoot, dest)}`);
      continue;
    }
    if (anchor !== null && anchor !== '' && dest.endsWith('.md') && statSync(dest).isFile()) {
      if (!anchors(read(dest)).has(decodeURIComponent(anchor).toLowerCase())) {
        problems.push(`${rel}:${line}: ${target} — ${relative(repoRoot, dest)} has no heading with anchor #${anchor}`);
      }
    }
  }
  return problems;
}

/** Every Markdown page under docs/ (any depth), relative to docs/, sorted. */
function docPages(): string[] {
  return (readdirSync(join(root, 'docs'), { recursive: true }) as string[])
    .filter((n) => n.endsWith('.md'))
    .map((n) => n.split(sep).join('/'))
    .sort();
}

/** README.md, CHANGELOG.md and every Markdown page under docs/. */
function pages(): string[] {
  const top = ['README.md', 'CHANGELOG.md'].map((p) => join(root, p)).filter((p) => existsSync(p));
  return [...top, ...docPages().map((n) => join(root, 'docs', n))];
}

/** The four groups of docs/README.md (tutorial, how-to, reference, explanation) and the pages each links. */
function docGroups(): Map<string, string[]> {
  const groups = new Map<string, string[]>();
  let current: string | undefined;
  for (const line of readFileSync(join(root, 'docs', 'README.md'), 'utf8').split('\n')) {
    const heading = /^##\s+(.*)$/.exec(line)?.[1];
    if (heading !== undefined) {
      current = heading.trim().toLowerCase();
      groups.set(current, []);
      continue;
    }
    if (current === undefined) continue;
    for (const m of line.matchAll(/\]\(([^)#\s]+\.md)(?:#[^)]*)?\)/g)) {
      const page = m[1] as string;
      if (!page.startsWith('../')) groups.get(current)?.push(page); // pages outside docs/ are not filed
    }
  }
  return groups;
}

describe('documentation links', () => {
  it('finds links and images outside code, with their lines', () => {
    const text = [
      '# Title',
      'See [grid](docs/grid.md#top) and',
      '![plot](img.png "a plot").',
      '`[not](a-link.md)`',
      '```',
      '[nor](this.md)',
      '```',
      '[ext](https://example.org/x)',
    ].join('\n');
    expect(links(text)).toEqual([
      { line: 2, target: 'docs/grid.md#top' },
      { line: 3, target: 'img.png' },
      { line: 8, target: 'https://example.org/x' },
    ]);
  });

  it('slugs headings as GitHub does, numbering repeats', () => {
    expect(slug('### `seed` (default `0`)'.replace(/^#+\s*/, ''))).toBe('seed-default-0');
    expect(slug('Dataset-backed tasks: `dataset`, `banking77`, `tat-qa`')).toBe(
      'dataset-backed-tasks-dataset-banking77-tat-qa',
    );
    expect(slug('torch 1.13 (Debian) vs 2.13 (the venv): tiny backend speed')).toBe(
      'torch-113-debian-vs-213-the-venv-tiny-backend-speed',
    );
    expect([...anchors('# A\n## B\n## B\n```\n# C\n```')]).toEqual(['a', 'b', 'b-1']);
  });

  it('reports a missing file, a missing anchor and a link out of the repository; skips external links', () => {
    const repo = mkdtempSync(join(tmpdir(), 'docs-links-'));
    try {
      mkdirSync(join(repo, 'docs'));
      writeFileSync(join(repo, 'docs', 'a.md'), '# Real heading\n![img](pic.png)\n');
      writeFileSync(join(repo, 'docs', 'pic.png'), '');
      writeFileSync(
        join(repo, 'README.md'),
        '# Top\n[ok](docs/a.md#real-heading) [self](#top)\n[gone](docs/missing.md)\n[bad](docs/a.md#nowhere) [up](../etc/passwd) [web](https://x.org/y#z)\n',
      );
      expect(brokenLinks(join(repo, 'docs', 'a.md'), repo)).toEqual([]);
      expect(brokenLinks(join(repo, 'README.md'), repo)).toEqual([
        'README.md:3: docs/missing.md — no such file docs/missing.md',
        'README.md:4: docs/a.md#nowhere — docs/a.md has no heading with anchor #nowhere',
        'README.md:4: ../etc/passwd — points outside the repository',
      ]);
    } finally {
      rmSync(repo, { recursive: true, force: true });
    }
  });

  it('README.md, CHANGELOG.md and docs/*.md: every relative link and image resolves', () => {
    const all = pages();
    expect(all.map((p) => relative(root, p))).toContain('README.md');
    expect(all.flatMap((p) => brokenLinks(p, root))).toEqual([]);
  });

  it('docs/README.md files every page under one of the four groups, once', () => {
    const groups = docGroups();
    expect([...groups.keys()]).toEqual(['tutorial', 'how-to guides', 'reference', 'explanation']);
    const filed = [...groups.values()].flat();
    const pagesOnDisk = docPages().filter((n) => n !== 'README.md');
    expect([...filed].sort(), 'a page filed twice or a page missing from docs/README.md').toEqual(pagesOnDisk);
  });
});
