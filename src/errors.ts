/**
 * Error types shared by every command. Each has a stable `code` and the process exit code the CLI
 * uses for it: 1 = failure, 2 = bad input (the user can fix it; never retried).
 */

export const EXIT_OK = 0;
export const EXIT_FAILURE = 1;
export const EXIT_BAD_INPUT = 2;

/** Where in a user's file a problem sits. Line and column are 1-based. */
export interface SourceLocation {
  file: string;
  line?: number;
  column?: number;
}

export class CanaryAuditError extends Error {
  readonly code: string;
  readonly exitCode: number;

  constructor(code: string, message: string, options: { exitCode?: number; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'CanaryAuditError';
    this.code = code;
    this.exitCode = options.exitCode ?? EXIT_FAILURE;
  }
}

/**
 * Bad input the user can fix: one line that names file:line:column, the field, the bad value and
 * what would be valid. Printed without a stack trace; exit code 2.
 */
export class UserInputError extends CanaryAuditError {
  readonly location: SourceLocation | undefined;
  readonly field: string | undefined;

  constructor(
    message: string,
    details: { location?: SourceLocation; field?: string; code?: string; cause?: unknown } = {},
  ) {
    super(details.code ?? 'E_BAD_INPUT', formatUserMessage(message, details.location, details.field), {
      exitCode: EXIT_BAD_INPUT,
      cause: details.cause,
    });
    this.name = 'UserInputError';
    this.location = details.location;
    this.field = details.field;
  }
}

/** Several input errors found in one pass, reported together (one line each). */
export class UserInputErrors extends CanaryAuditError {
  readonly errors: UserInputError[];

  constructor(errors: UserInputError[]) {
    super('E_BAD_INPUT', errors.map((e) => e.message).join('\n'), { exitCode: EXIT_BAD_INPUT });
    this.name = 'UserInputErrors';
    this.errors = errors;
  }
}

export function formatLocation(location: SourceLocation): string {
  let text = location.file;
  if (location.line !== undefined) {
    text += `:${location.line}`;
    if (location.column !== undefined) text += `:${location.column}`;
  }
  return text;
}

function formatUserMessage(message: string, location?: SourceLocation, field?: string): string {
  const where = location ? `${formatLocation(location)}: ` : '';
  const what = field ? `${field}: ` : '';
  return `${where}${what}${message}`;
}

/** Quote a user value for an error message, shortened so one line stays one line. */
export function quoteValue(value: unknown, max = 60): string {
  let text: string;
  try {
    text = typeof value === 'string' ? JSON.stringify(value) : (JSON.stringify(value) ?? String(value));
  } catch {
    text = String(value);
  }
  // JSON escapes C0 controls but leaves DEL, C1 controls (U+009B is a terminal's CSI) and bidi
  // overrides raw: escaped here the same way, so the quote stays JSON and inert on a terminal.
  text = text.replace(UNSAFE_BEYOND_JSON, escapeChar);
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/**
 * Bidirectional formatting characters (embeddings, overrides, isolates: U+202A–U+202E,
 * U+2066–U+2069) and the line and paragraph separators (U+2028, U+2029): not control characters
 * to Unicode, but they reorder or break what a terminal shows (a "Trojan Source" name).
 */
const FORMATTING = '\u202a-\u202e\u2066-\u2069\u2028\u2029';
const UNSAFE_BEYOND_JSON = new RegExp(`[\u007f-\u009f${FORMATTING}]`, 'g');

function escapeChar(c: string): string {
  return `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;
}

/** A damaged or hand-edited artifact (audit.json, manifest.json, a score file): file, field, what is wrong. */
export function artifactError(file: string, field: string, message: string): UserInputError {
  return new UserInputError(message, { location: { file }, field, code: 'E_BAD_ARTIFACT' });
}

const CONTROL = new RegExp(`[\u0000-\u0008\u000b-\u001f\u007f-\u009f${FORMATTING}]`, 'g');

/**
 * `text` safe to print on a terminal: control characters other than newline and tab are shown as
 * `\u001b`-style escapes, so a user string (a grid label, a trainer's message) cannot move the
 * cursor, retitle the window or recolour the screen.
 */
export function terminalSafe(text: string): string {
  return text.replace(CONTROL, escapeChar);
}

/** The first control or bidi formatting character of `text` (newline and tab included), or null. */
export function firstControlCharacter(text: string): string | null {
  return new RegExp(`[\u0000-\u001f\u007f-\u009f${FORMATTING}]`).exec(text)?.[0] ?? null;
}
