#!/usr/bin/env node
import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { CanaryAuditError, EXIT_BAD_INPUT, EXIT_FAILURE, terminalSafe } from '../errors.js';
import { explainWriteError } from '../fs/index.js';
import { log } from '../log.js';
import { closest } from '../grid/suggest.js';
import { commandHelp, parseCommandArgs, type Command } from './command.js';

/**
 * `canary-audit`: one CLI with subcommands. Each subcommand lives in its own module and is loaded
 * only when called, so `plan` does not pay for BullMQ and `report` does not pay for Redis.
 * Exit codes: 0 ok, 1 failure, 2 bad input.
 */
export const COMMANDS: Record<string, { summary: string; load: () => Promise<Command> }> = {
  plan: {
    summary: 'Expand an audit grid into run manifests (prints them; --out writes them).',
    load: async () => (await import('./plan.js')).command,
  },
  run: {
    summary: 'Run a whole audit on this machine: private Redis, local workers, report.',
    load: async () => (await import('./run.js')).command,
  },
  submit: {
    summary: 'Expand a grid and queue one fine-tuning job per run on Redis.',
    load: async () => (await import('./submit.js')).command,
  },
  worker: {
    summary: 'Run queued fine-tuning jobs: one worker per GPU (or N CPU workers).',
    load: async () => (await import('./worker.js')).command,
  },
  slurm: {
    summary: 'Write (and with --submit, submit) an sbatch script that runs a worker pool on a Slurm cluster.',
    load: async () => (await import('./slurm.js')).command,
  },
  status: {
    summary: 'Show audits and runs in the queue: state, progress, ETA, failures.',
    load: async () => (await import('./status.js')).command,
  },
  dashboard: {
    summary: 'Serve a live web dashboard of audits, runs and GPU workers (read-only by default).',
    load: async () => (await import('./dashboard.js')).command,
  },
  cancel: {
    summary: 'Cancel an audit: drop waiting runs, stop running trainers.',
    load: async () => (await import('./cancel.js')).command,
  },
  models: {
    summary: 'Download Hub models into the local Hugging Face cache, for offline workers.',
    load: async () => (await import('./models.js')).command,
  },
  datasets: {
    summary: 'Download Hub datasets (card and split files) into the local Hugging Face cache.',
    load: async () => (await import('./datasets.js')).command,
  },
  report: {
    summary: 'Compute exposure and recovery from stored scores; write reports.',
    load: async () => (await import('./report.js')).command,
  },
};

export function mainHelp(): string {
  const width = Math.max(...Object.keys(COMMANDS).map((n) => n.length)) + 2;
  const lines = [
    'Usage: canary-audit <command> [options]',
    '',
    'Canary-audit fine-tuning orchestrator: audit grids → training manifests → GPU job queue →',
    'exposure and recovery reports with controls and intervals.',
    '',
    'Commands:',
    ...Object.entries(COMMANDS).map(([name, c]) => `  ${name.padEnd(width)}${c.summary}`),
    '',
    'Run `canary-audit help <command>` (or `canary-audit <command> --help`) for the options of one command.',
    'Exit codes: 0 ok, 1 failure, 2 bad input.',
  ];
  return `${lines.join('\n')}\n`;
}

/** An unknown command name, with the nearest known one when it looks like a typo. */
function unknownCommand(name: string): string {
  const hint = closest(name, Object.keys(COMMANDS));
  return `canary-audit: unknown command ${JSON.stringify(name)}${hint ? ` (did you mean ${hint}?)` : ''}; commands: ${Object.keys(COMMANDS).join(', ')} (see \`canary-audit --help\`)\n`;
}

export async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === 'help' && rest.length > 0) {
    // `canary-audit help plan`: the command's own help, as `plan --help` prints it.
    const entry = COMMANDS[rest[0] as string];
    if (!entry) {
      process.stderr.write(unknownCommand(rest[0] as string));
      return EXIT_BAD_INPUT;
    }
    process.stdout.write(commandHelp(await entry.load()));
    return 0;
  }
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(mainHelp());
    return name === undefined ? EXIT_BAD_INPUT : 0;
  }
  if (name === '--version' || name === '-V') {
    const { readFileSync } = await import('node:fs');
    const { join } = await import('node:path');
    const { PACKAGE_ROOT } = await import('../paths.js');
    const pkg = JSON.parse(readFileSync(join(PACKAGE_ROOT, 'package.json'), 'utf8')) as { version: string };
    process.stdout.write(`${pkg.version}\n`);
    return 0;
  }
  const entry = COMMANDS[name];
  if (!entry) {
    process.stderr.write(unknownCommand(name));
    return EXIT_BAD_INPUT;
  }
  const command = await entry.load();
  try {
    const args = parseCommandArgs(command, rest);
    if (args.values.help) {
      process.stdout.write(commandHelp(command));
      return 0;
    }
    return await command.run(args);
  } catch (error) {
    return reportError(error);
  }
}

/** Print an error the way users should see it: one line per problem, no stack for bad input. */
export function reportError(error: unknown): number {
  if (error instanceof CanaryAuditError) {
    process.stderr.write(`canary-audit: ${terminalSafe(error.message)}\n`);
    if (error.exitCode !== EXIT_BAD_INPUT && error.cause !== undefined) {
      log.debug({ err: error.cause }, 'cause');
    }
    return error.exitCode;
  }
  // A file-system error no command explained (full, read-only, no permission): one line, its fix.
  const fsError = explainWriteError(error, '');
  if (fsError) return reportError(fsError);
  log.error({ err: error }, 'internal error');
  process.stderr.write(
    `canary-audit: internal error: ${terminalSafe(error instanceof Error ? error.message : String(error))}\n`,
  );
  return EXIT_FAILURE;
}

function invokedDirectly(): boolean {
  const script = process.argv[1];
  if (script === undefined) return false;
  try {
    // Through npm's bin link argv[1] is a symlink; compare real paths.
    return realpathSync(script) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

/**
 * A command has finished when its promise settles (long-running ones, `worker`, `dashboard`,
 * `status --watch`, settle on their signal), so the process ends there, once stdout and stderr
 * have taken every write: otherwise a Redis client's reply parser (ioredis keeps a 50 ms interval
 * after a large reply) or another idle timer held it open for seconds after its output (1.5–3 s
 * of `status --json` at 10,000 runs, bench/scale.ts).
 */
function exitWhenFlushed(code: number): void {
  process.exitCode = code;
  process.stdout.write('', () => process.stderr.write('', () => process.exit(code)));
}

const isEntry = invokedDirectly();
if (isEntry) {
  main(process.argv.slice(2)).then(exitWhenFlushed, (error: unknown) => exitWhenFlushed(reportError(error)));
}
