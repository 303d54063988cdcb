/**
 * Glob patterns over repository paths ('/'-separated, relative), as dataset cards and the grid's
 * `files` write them (`data/train-*`, `**\/*.parquet`): `*` and `?` stay inside one path part,
 * `**` spans parts (`**\/` also matches no folder at all), `[abc]` / `[!abc]` / `[a-z]` are
 * character classes. A pattern without those characters names one path.
 */
export function globToRegExp(pattern: string): RegExp {
  let out = '';
  let i = 0;
  const p = pattern.replace(/^\.\//, '');
  while (i < p.length) {
    const c = p[i] as string;
    if (c === '*') {
      if (p[i + 1] === '*') {
        const wholePart = (i === 0 || p[i - 1] === '/') && p[i + 2] === '/';
        out += wholePart ? '(?:[^/]+/)*' : '.*';
        i += wholePart ? 3 : 2;
      } else {
        out += '[^/]*';
        i += 1;
      }
    } else if (c === '?') {
      out += '[^/]';
      i += 1;
    } else if (c === '[') {
      const end = p.indexOf(']', i + 2);
      if (end === -1) {
        out += '\\[';
        i += 1;
      } else {
        let body = p.slice(i + 1, end);
        const negate = body.startsWith('!') || body.startsWith('^');
        if (negate) body = body.slice(1);
        out += `[${negate ? '^/' : ''}${body.replace(/[\\\]]/g, '\\$&')}]`;
        i = end + 1;
      }
    } else {
      out += c.replace(/[.+^${}()|\\]/g, '\\$&');
      i += 1;
    }
  }
  return new RegExp(`^${out}$`);
}

export function isGlob(pattern: string): boolean {
  return /[*?[]/.test(pattern);
}

/** The paths a pattern matches, in name order. */
export function matchGlob(pattern: string, paths: readonly string[]): string[] {
  const re = globToRegExp(pattern);
  return paths.filter((path) => re.test(path)).sort();
}
