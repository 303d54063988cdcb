import {
  isAlias,
  isMap,
  isNode,
  isPair,
  isScalar,
  isSeq,
  LineCounter,
  parseDocument,
  visit,
  type Document,
  type Node,
} from 'yaml';
import { UserInputError, UserInputErrors, type SourceLocation } from '../errors.js';

/** A path into the parsed grid: object keys and array indices, as ajv's instancePath names them. */
export type GridPath = readonly (string | number)[];

/**
 * A YAML grid parsed with source positions, so any error about a value can name the file, line
 * and column where the user wrote it.
 */
export class GridSource {
  readonly file: string;
  readonly text: string;
  readonly value: unknown;
  private readonly doc: Document;
  private readonly lines: LineCounter;

  private constructor(file: string, text: string, doc: Document, lines: LineCounter) {
    this.file = file;
    this.text = text;
    this.doc = doc;
    this.lines = lines;
    this.value = this.toValue();
  }

  /**
   * The document as plain values. The YAML library refuses an alias bomb (aliases that expand past
   * maxAliasCount) and a merge key (`<<`) whose value is not a map by throwing: bad input, said
   * in one line at the alias or merge key that caused it.
   */
  private toValue(): unknown {
    try {
      return this.doc.toJS({ maxAliasCount: 1000 }) as unknown;
    } catch (error) {
      if (!(error instanceof Error) || !/alias|merge/i.test(error.message)) throw error;
      const merge = /merge/i.test(error.message);
      const hint = merge
        ? 'a merge key (<<) takes a map or an alias of a map'
        : 'aliases expand to too many values (an alias bomb?); write the values out';
      const reason = error.message.split('\n')[0]?.replace(/\.$/, '') ?? error.message;
      throw new UserInputError(`YAML: ${reason}; ${hint}`, {
        location: this.position(this.culprit(merge)),
        code: 'E_GRID_YAML',
      });
    }
  }

  /** The first merge key whose value is not a map (or the first alias, for an alias bomb). */
  private culprit(merge: boolean): unknown {
    let found: unknown;
    visit(this.doc, {
      Pair: (_key, pair) => {
        if (!merge || found || !isScalar(pair.key) || (pair.key.source ?? pair.key.value) !== '<<') return undefined;
        const value = isAlias(pair.value) ? pair.value.resolve(this.doc) : pair.value;
        const maps =
          isMap(value) || (isSeq(value) && value.items.every((i) => isMap(isAlias(i) ? i.resolve(this.doc) : i)));
        if (!maps) found = pair.key;
        return undefined;
      },
      Alias: (_key, alias) => {
        if (!merge && !found) found = alias;
        return undefined;
      },
    });
    return found;
  }

  /** Parse YAML text; syntax errors (and duplicate keys) become one-line input errors. */
  static parse(file: string, text: string): GridSource {
    const lines = new LineCounter();
    const doc = parseDocument(text, { lineCounter: lines, prettyErrors: true, uniqueKeys: true, merge: true });
    if (doc.errors.length > 0) {
      // A stack overflow can be reported at several levels of the same nesting: say it once.
      const deep = doc.errors.filter((e) => /call stack/i.test(e.message));
      const errors = deep.length > 0 ? deep.slice(0, 1) : doc.errors;
      throw new UserInputErrors(
        errors.map((e) => {
          const pos = e.linePos?.[0];
          const reason = (e.message.split('\n')[0] ?? e.message).replace(/ at line \d+, column \d+:?$/, '');
          // The parser recurses once per level of nesting: hundreds of levels overflow its stack,
          // which it reports as the engine's own "Maximum call stack size exceeded".
          if (/call stack/i.test(reason)) {
            return new UserInputError(
              'the grid nests lists or maps too deeply for the YAML parser (hundreds of levels, here); a grid needs a few levels: remove the extra brackets or indentation (see docs/grid.md)',
              {
                location: { file, ...(pos ? { line: pos.line, column: pos.col } : {}) },
                code: 'E_GRID_YAML',
              },
            );
          }
          const hint = e.code === 'DUPLICATE_KEY' ? '; each key (e.g. an axis) may appear once' : '';
          return new UserInputError(`YAML: ${reason}${hint}`, {
            location: { file, ...(pos ? { line: pos.line, column: pos.col } : {}) },
            code: 'E_GRID_YAML',
          });
        }),
      );
    }
    const numbers = numberProblems(doc, lines, file);
    if (numbers.length > 0) throw new UserInputErrors(numbers);
    return new GridSource(file, text, doc, lines);
  }

  /** Where the value at `path` was written; falls back to the nearest enclosing value. */
  locate(path: GridPath, options: { key?: boolean } = {}): SourceLocation {
    let node: unknown = this.doc.contents;
    let best: unknown = node;
    for (let i = 0; i < path.length; i += 1) {
      const segment = path[i] as string | number;
      if (isAlias(node)) node = node.resolve(this.doc);
      if (isMap(node)) {
        const pair = node.items.find((p) => isPair(p) && isScalar(p.key) && String(p.key.value) === String(segment));
        if (!pair) break;
        // For an unknown key, point at the key itself rather than its value.
        node = options.key && i === path.length - 1 ? pair.key : (pair.value ?? pair.key);
      } else if (isSeq(node)) {
        const item = node.items[Number(segment)];
        if (item === undefined) break;
        node = item;
      } else {
        break;
      }
      if (isNode(node)) best = node;
    }
    return this.position(best);
  }

  private position(node: unknown): SourceLocation {
    const range = isNode(node) ? (node as Node).range : undefined;
    if (!range) return { file: this.file, line: 1, column: 1 };
    const pos = this.lines.linePos(range[0]);
    return { file: this.file, line: pos.line, column: pos.col };
  }
}

/**
 * Numbers JavaScript cannot hold as written: an integer past 2^53 - 1 would be rounded (two seeds
 * would name one audit), and .nan/.inf have no use in a grid (and print as "null" in JSON).
 */
function numberProblems(doc: Document, lines: LineCounter, file: string): UserInputError[] {
  const problems: UserInputError[] = [];
  visit(doc, {
    Scalar: (_key, node) => {
      const v = node.value;
      if (typeof v !== 'number' && typeof v !== 'bigint') return;
      const written = node.source ?? String(v);
      let why: string | null = null;
      if (typeof v === 'number' && !Number.isFinite(v)) why = `${written} is not a finite number; write a number`;
      else if (Number.isInteger(Number(v)) && !Number.isSafeInteger(Number(v))) {
        why = `${written} is too large to keep exactly (integers up to 2^53 - 1 = ${Number.MAX_SAFE_INTEGER}); use a smaller number`;
      }
      if (!why) return;
      const pos = node.range ? lines.linePos(node.range[0]) : undefined;
      problems.push(
        new UserInputError(why, {
          location: { file, ...(pos ? { line: pos.line, column: pos.col } : {}) },
          code: 'E_GRID_NUMBER',
        }),
      );
    },
  });
  return problems;
}

/** `axes.visibility[0]` for ['axes', 'visibility', 0]: how messages name a field. */
export function formatPath(path: GridPath): string {
  let out = '';
  for (const segment of path) {
    if (typeof segment === 'number') out += `[${segment}]`;
    else out += out === '' ? segment : `.${segment}`;
  }
  return out === '' ? '(grid)' : out;
}
