import { parseArgs } from 'node:util';
import { UserInputError } from '../errors.js';

/**
 * One CLI subcommand. Options are declared once; the parser, `--help` text and the bad-flag errors
 * are all derived from the declaration.
 */
export interface OptionSpec {
  type: 'string' | 'boolean';
  short?: string;
  /** Shown in --help; say the default and the unit. */
  description: string;
  /** Placeholder in help, e.g. DIR. */
  value?: string;
  default?: string | boolean;
  multiple?: boolean;
}

export interface Command {
  name: string;
  summary: string;
  /** e.g. `GRID [--json] [--out DIR]` */
  usage: string;
  /** Longer text printed under the usage line. */
  description?: string;
  options: Record<string, OptionSpec>;
  /** Positional arguments: [min, max]. */
  positionals: [number, number];
  run(args: ParsedArgs): Promise<number>;
}

export interface ParsedArgs {
  values: Record<string, string | boolean | string[] | undefined>;
  positionals: string[];
}

/** Options every command accepts. */
export const COMMON_OPTIONS: Record<string, OptionSpec> = {
  help: { type: 'boolean', short: 'h', description: 'Show this help and exit.' },
};

export function parseCommandArgs(command: Command, argv: string[]): ParsedArgs {
  const options = { ...COMMON_OPTIONS, ...command.options };
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      strict: true,
      options: Object.fromEntries(
        Object.entries(options).map(([name, spec]) => [
          name,
          {
            type: spec.type,
            ...(spec.short ? { short: spec.short } : {}),
            ...(spec.multiple ? { multiple: true } : {}),
            ...(spec.default !== undefined ? { default: spec.default } : {}),
          },
        ]),
      ),
    });
  } catch (error) {
    const reason = error instanceof Error ? error.message.split('\n')[0] : String(error);
    throw new UserInputError(`${reason}; see \`canary-audit ${command.name} --help\``, { code: 'E_BAD_FLAG' });
  }
  if (parsed.values.help) return { values: parsed.values as ParsedArgs['values'], positionals: parsed.positionals };
  const [min, max] = command.positionals;
  if (parsed.positionals.length < min || parsed.positionals.length > max) {
    throw new UserInputError(
      `expected ${min === max ? min : `${min} to ${max}`} argument(s), got ${parsed.positionals.length}; usage: canary-audit ${command.name} ${command.usage}`,
      { code: 'E_BAD_ARGS' },
    );
  }
  return { values: parsed.values as ParsedArgs['values'], positionals: parsed.positionals };
}

export function commandHelp(command: Command): string {
  const lines = [`Usage: canary-audit ${command.name} ${command.usage}`, '', command.summary];
  if (command.description) lines.push('', command.description.trim());
  lines.push('', 'Options:');
  const options = { ...command.options, ...COMMON_OPTIONS };
  const rows = Object.entries(options).map(([name, spec]) => {
    const flag = `${spec.short ? `-${spec.short}, ` : '    '}--${name}${spec.type === 'string' ? ` ${spec.value ?? 'VALUE'}` : ''}`;
    return [flag, spec.description] as const;
  });
  const width = Math.max(...rows.map(([flag]) => flag.length)) + 2;
  for (const [flag, text] of rows) lines.push(`  ${flag.padEnd(width)}${text}`);
  return `${lines.join('\n')}\n`;
}

/** Read a string option, or undefined. */
export function stringOption(args: ParsedArgs, name: string): string | undefined {
  const v = args.values[name];
  return typeof v === 'string' ? v : undefined;
}

/** Read a positive integer option with a default; a bad value is a user error naming the flag. */
export function intOption(args: ParsedArgs, name: string, fallback: number, min = 1): number {
  const raw = stringOption(args, name);
  if (raw === undefined) return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min) {
    throw new UserInputError(`--${name} must be an integer >= ${min}, got ${JSON.stringify(raw)}`, { code: 'E_BAD_FLAG' });
  }
  return n;
}
