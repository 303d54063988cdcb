import { commandHelp } from './command.js';
import { COMMANDS, mainHelp } from './main.js';

/**
 * docs/cli.md, the CLI reference: every command's `--help`, verbatim, generated from the same option
 * tables the parser reads, so the page cannot drift from what the commands accept
 * (`test/docs-generated.test.ts` compares it; `npm run docs:update` rewrites it).
 */
export async function cliReference(): Promise<string> {
  const lines = [
    '# CLI reference',
    '',
    "<!-- Generated from the commands' option tables by `npm run docs:update`; do not edit by hand. -->",
    '',
    'Reference. Every command of `canary-audit` with its `--help`, as the command prints it. Run any of',
    'them from a clone with `npx canary-audit <command> --help` (after `npm run build`), or',
    '`canary-audit` once the package is installed (`npm install -g .` or `npm link`).',
    '',
    '```text',
    mainHelp().trimEnd(),
    '```',
    '',
    '| command | what it does |',
    '|---|---|',
    ...Object.entries(COMMANDS).map(([name, c]) => `| [\`${name}\`](#canary-audit-${name}) | ${c.summary} |`),
  ];
  for (const [name, entry] of Object.entries(COMMANDS)) {
    const command = await entry.load();
    lines.push('', `## canary-audit ${name}`, '', '```text', commandHelp(command).trimEnd(), '```');
  }
  return `${lines.join('\n')}\n`;
}
