import { readFileSync } from 'node:fs';

/** A bench script's --help: its opening doc comment, without the comment markers. */
export function docHelp(scriptUrl: string): string {
  return readFileSync(new URL(scriptUrl), 'utf8')
    .split('*/')[0]!
    .replace(/^\/\*\*\n?/, '')
    .replace(/^ \* ?/gm, '');
}
