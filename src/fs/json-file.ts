import { dirname } from 'node:path';
import { UserInputError } from '../errors.js';
import { readInside } from './read-boundary.js';

/** Largest JSON artifact read (audit.json of a 10,000-run audit is a few MB), bytes. */
export const MAX_JSON_BYTES = 256 * 1024 * 1024;

/**
 * Read and parse a JSON artifact. A syntax error names the file with its line and column, so a
 * hand-edited or truncated artifact points at the exact spot (V8's own message often gives no
 * position, so the spot is found by a small scanner run only after JSON.parse has failed).
 * Read through the read boundary: inside `root` (default: the file's own folder) after links, a
 * regular file, at most MAX_JSON_BYTES.
 */
export async function readJsonFile(path: string, root: string = dirname(path)): Promise<unknown> {
  const text = (await readInside(root, path, { maxBytes: MAX_JSON_BYTES, what: 'JSON artifact' })).toString('utf8');
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    const offset = jsonErrorOffset(text);
    const before = text.slice(0, offset);
    const line = before.split('\n').length;
    const column = offset - before.lastIndexOf('\n');
    throw new UserInputError(
      `not valid JSON (${message.split('\n')[0]}); the file is damaged or was truncated — rerun the step that writes it`,
      {
        location: { file: path, line, column },
        code: 'E_BAD_ARTIFACT',
        cause: error,
      },
    );
  }
}

/** Offset of the first character where `text` stops being valid JSON (text.length if truncated). */
export function jsonErrorOffset(text: string): number {
  let i = 0;
  const ws = (): void => {
    while (i < text.length && ' \t\r\n'.includes(text[i] as string)) i += 1;
  };
  const fail = (): never => {
    throw i;
  };
  const literal = (word: string): void => {
    for (const ch of word) {
      if (text[i] !== ch) fail();
      i += 1;
    }
  };
  const string = (): void => {
    if (text[i] !== '"') fail();
    i += 1;
    while (i < text.length && text[i] !== '"') {
      const ch = text[i] as string;
      if (ch < ' ') fail();
      if (ch === '\\') {
        i += 1;
        if (text[i] === 'u') {
          i += 1;
          for (let k = 0; k < 4; k += 1, i += 1) if (!/[0-9a-fA-F]/.test(text[i] ?? '')) fail();
          continue;
        }
        if (!'"\\/bfnrt'.includes(text[i] ?? 'x')) fail();
      }
      i += 1;
    }
    if (i >= text.length) fail();
    i += 1;
  };
  const number = (): void => {
    const m = /^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/.exec(text.slice(i));
    if (!m || m[0] === '' || m[0] === '-') fail();
    i += (m as RegExpExecArray)[0].length;
  };
  const value = (): void => {
    ws();
    const ch = text[i];
    if (ch === '{') {
      i += 1;
      ws();
      if (text[i] === '}') {
        i += 1;
        return;
      }
      for (;;) {
        ws();
        string();
        ws();
        if (text[i] !== ':') fail();
        i += 1;
        value();
        ws();
        if (text[i] === ',') i += 1;
        else if (text[i] === '}') {
          i += 1;
          return;
        } else fail();
      }
    } else if (ch === '[') {
      i += 1;
      ws();
      if (text[i] === ']') {
        i += 1;
        return;
      }
      for (;;) {
        value();
        ws();
        if (text[i] === ',') i += 1;
        else if (text[i] === ']') {
          i += 1;
          return;
        } else fail();
      }
    } else if (ch === '"') string();
    else if (ch === 't') literal('true');
    else if (ch === 'f') literal('false');
    else if (ch === 'n') literal('null');
    else number();
  };
  try {
    value();
    ws();
    return Math.min(i, text.length);
  } catch (offset) {
    return Math.min(offset as number, text.length);
  }
}
