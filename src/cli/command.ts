import { parseArgs } from 'node:util';
import { UserInputError } from '../errors.js';
import { closest } from '../grid/suggest.js';

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
  /**
   * The positional arguments as shown in the usage line, e.g. `GRID` or `fetch GRID|MODEL`. The
   * option part of the usage line is generated from `options` (any `[--flag ...]` groups written
   * here are dropped), so the usage line cannot drift from what the parser accepts.
   */
  usage: string;
  /** Verbs taken as the first positional (`models fetch ...`), with a few words each. */
  actions?: Record<string, string>;
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

type ParseToken = {
  kind: string;
  name?: string;
  rawName?: string;
  value?: string | undefined;
  inlineValue?: boolean | undefined;
};

/** The options a command accepts: its own table and the common ones. */
function allOptions(command: Command): Record<string, OptionSpec> {
  return { ...command.options, ...COMMON_OPTIONS };
}

function seeHelp(command: Command): string {
  return `see \`canary-audit help ${command.name}\``;
}

/**
 * The first problem with the flags, in words: an unknown flag gets the nearest known one, a flag
 * missing its value names the value. Node's parseArgs messages are not shown to users.
 */
function flagProblem(command: Command, argv: string[]): string | undefined {
  const options = allOptions(command);
  const byShort = new Map(
    Object.entries(options).flatMap(([name, spec]) => (spec.short ? [[spec.short, name] as const] : [])),
  );
  let tokens: ParseToken[];
  try {
    const types = Object.fromEntries(
      Object.entries(options).map(([name, spec]) => [
        name,
        { type: spec.type, ...(spec.short ? { short: spec.short } : {}) },
      ]),
    );
    tokens = parseArgs({ args: argv, allowPositionals: true, strict: false, tokens: true, options: types })
      .tokens as ParseToken[];
  } catch {
    return undefined;
  }
  for (let i = 0; i < tokens.length; i += 1) {
    const token = tokens[i] as ParseToken;
    if (token.kind !== 'option' || token.name === undefined) continue;
    const isShort = token.rawName !== undefined && !token.rawName.startsWith('--');
    const name = isShort ? byShort.get(token.name) : token.name;
    const spec = name === undefined ? undefined : options[name];
    if (name === undefined || spec === undefined) {
      const hint = isShort ? undefined : closest(token.name, Object.keys(options));
      return `${command.name} has no option ${token.rawName ?? token.name}${hint ? ` (did you mean --${hint}?)` : ''}`;
    }
    if (spec.type === 'string') {
      // Non-strict parsing leaves a value-less string option with value undefined.
      const next = tokens[i + 1];
      if (token.value === undefined && !token.inlineValue) {
        return `--${name} needs a value (${spec.value ?? 'VALUE'})${next?.kind === 'option' ? `, got the flag ${next.rawName ?? ''} after it` : ''}`;
      }
    } else if (token.inlineValue) {
      return `--${name} takes no value, got --${name}=${token.value ?? ''}`;
    }
  }
  return undefined;
}

/** How many positionals a command got wrong, said with their names from the usage line. */
function positionalProblem(command: Command, positionals: string[]): string | undefined {
  const [min, max] = command.positionals;
  const actions = command.actions;
  if (actions && positionals.length > 0 && !((positionals[0] as string) in actions)) {
    const verb = positionals[0] as string;
    const names = Object.keys(actions);
    const hint = closest(verb, names);
    const list = Object.entries(actions)
      .map(([a, what]) => `${a} (${what})`)
      .join(', ');
    return `${command.name} has no action ${JSON.stringify(verb)}${hint ? ` (did you mean ${hint}?)` : ''}; ${names.length === 1 ? 'its one action is' : 'actions:'} ${list}`;
  }
  if (positionals.length >= min && positionals.length <= max) return undefined;
  const names = positionalNames(command);
  if (positionals.length < min) {
    if (actions && positionals.length === 0) {
      return `${command.name} needs an action: ${Object.entries(actions)
        .map(([a, what]) => `${a} (${what})`)
        .join(', ')}`;
    }
    const missing = names.slice(positionals.length, min);
    return `${command.name} needs ${missing.length > 0 ? missing.join(' ') : `${min} argument(s)`}`;
  }
  const extra = positionals
    .slice(max)
    .map((p) => JSON.stringify(p))
    .join(' ');
  return max === 0
    ? `${command.name} takes no arguments, got ${extra}`
    : `${command.name} takes ${max === 1 ? 'one argument' : `at most ${max} arguments`} (${names.join(' ')}); unexpected ${extra}`;
}

function positionalNames(command: Command): string[] {
  return positionalUsage(command)
    .split(/\s+/)
    .filter((w) => w !== '')
    .map((w) => w.replace(/^\[|\]$/g, ''));
}

/** The positional part of `usage`, without any option groups written there. */
function positionalUsage(command: Command): string {
  return command.usage
    .replace(/\[-[^\]]*\]/g, '')
    .replace(/\s+/g, ' ')
    .trim();
}

/** `[--flag VALUE]` for every option, in table order, common options last. */
export function optionUsage(command: Command): string[] {
  return Object.entries(allOptions(command)).map(
    ([name, spec]) => `[--${name}${spec.type === 'string' ? ` ${spec.value ?? 'VALUE'}` : ''}]`,
  );
}

/** The usage line, generated from the positional part and the option table, wrapped at `width`. */
export function usageLine(command: Command, width = 100): string {
  const head = `canary-audit ${command.name}`;
  const words = [...(positionalUsage(command) ? [positionalUsage(command)] : []), ...optionUsage(command)];
  const lines: string[] = [];
  let line = head;
  for (const word of words) {
    if (line.length + 1 + word.length > width && line.trim() !== head) {
      lines.push(line);
      line = `${' '.repeat(head.length)} ${word}`;
    } else {
      line = `${line} ${word}`;
    }
  }
  lines.push(line);
  return lines.join('\n       ');
}

export function parseCommandArgs(command: Command, argv: string[]): ParsedArgs {
  const options = allOptions(command);
  const problem = flagProblem(command, argv);
  if (problem !== undefined) throw new UserInputError(`${problem}; ${seeHelp(command)}`, { code: 'E_BAD_FLAG' });
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
    // What flagProblem does not catch (e.g. a value that looks like a flag): the message, unquoted.
    const reason =
      error instanceof Error ? (error.message.split('\n')[0] as string).replace(/['"`]/g, '') : String(error);
    throw new UserInputError(`${reason}; ${seeHelp(command)}`, { code: 'E_BAD_FLAG' });
  }
  if (parsed.values.help) return { values: parsed.values as ParsedArgs['values'], positionals: parsed.positionals };
  const wrong = positionalProblem(command, parsed.positionals);
  if (wrong !== undefined) {
    throw new UserInputError(
      `${wrong}; usage: canary-audit ${command.name} ${positionalUsage(command)}; ${seeHelp(command)}`.replace(
        / {2,}/g,
        ' ',
      ),
      { code: 'E_BAD_ARGS' },
    );
  }
  return { values: parsed.values as ParsedArgs['values'], positionals: parsed.positionals };
}

export function commandHelp(command: Command): string {
  const lines = [`Usage: ${usageLine(command)}`, '', command.summary];
  if (command.actions) {
    lines.push('', 'Actions:');
    const width = Math.max(...Object.keys(command.actions).map((a) => a.length)) + 2;
    for (const [a, what] of Object.entries(command.actions)) lines.push(`  ${a.padEnd(width)}${what}`);
  }
  if (command.description) lines.push('', command.description.trim());
  lines.push('', 'Options:');
  const rows = Object.entries(allOptions(command)).map(([name, spec]) => {
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
    throw new UserInputError(`--${name} must be an integer >= ${min}, got ${JSON.stringify(raw)}`, {
      code: 'E_BAD_FLAG',
    });
  }
  return n;
}
