import { realpathSync } from 'node:fs';
import { delimiter, join, relative } from 'node:path';
import { PACKAGE_ROOT } from '../paths.js';

/**
 * How a printed next step names the CLI so that it runs as printed, from the folder the user is
 * in: `canary-audit` when that name on PATH is this CLI (`npm link`, a global install);
 * `npx canary-audit` from the package root (npm exec runs the project's own bin there, linked or
 * not; anywhere else it would ask the registry for a package of that name); else `node` and the
 * built CLI's path (relative to the current folder when inside it).
 */
export const CLI_SCRIPT = join(PACKAGE_ROOT, 'dist', 'cli', 'main.js');
const BIN = 'canary-audit';

function real(path: string): string | null {
  try {
    return realpathSync(path);
  } catch {
    return null;
  }
}

/** A path as one shell word: as is when it needs no quoting, else in single quotes. */
export function shellWord(text: string): string {
  return /^[\w./@:+=,-]+$/.test(text) ? text : `'${text.replace(/'/g, `'\\''`)}'`;
}

/** The command that starts this CLI from `cwd` (see above). */
export function cliCommand(env: NodeJS.ProcessEnv = process.env, cwd: string = process.cwd()): string {
  const script = real(CLI_SCRIPT) ?? CLI_SCRIPT;
  // Under npm (npx, `npm run quickstart`) PATH is npm's, with the project's bins linked into it;
  // the user's shell, where the line is pasted, has none of them.
  const path = env.npm_command === undefined ? (env.PATH ?? '') : '';
  for (const dir of path.split(delimiter)) {
    if (dir !== '' && real(join(dir, BIN)) === script) return BIN;
  }
  if (real(cwd) === real(PACKAGE_ROOT)) return `npx ${BIN}`;
  const rel = relative(cwd, CLI_SCRIPT);
  return `node ${shellWord(rel !== '' && !rel.startsWith('..') ? rel : CLI_SCRIPT)}`;
}

/** A path argument as printed in a next step: relative to `cwd` when inside it, one shell word. */
export function pathArg(path: string, cwd: string = process.cwd()): string {
  const rel = relative(cwd, path);
  return shellWord(rel !== '' && !rel.startsWith('..') ? rel : path);
}
