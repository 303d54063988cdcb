import { isAlias, isMap, isNode, isPair, isScalar, isSeq, LineCounter, parseDocument, type Document, type Node } from 'yaml';
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
    this.value = doc.toJS({ maxAliasCount: 1000 }) as unknown;
  }

  /** Parse YAML text; syntax errors (and duplicate keys) become one-line input errors. */
  static parse(file: string, text: string): GridSource {
    const lines = new LineCounter();
    const doc = parseDocument(text, { lineCounter: lines, prettyErrors: true, uniqueKeys: true, merge: true });
    if (doc.errors.length > 0) {
      throw new UserInputErrors(
        doc.errors.map((e) => {
          const pos = e.linePos?.[0];
          const reason = (e.message.split('\n')[0] ?? e.message).replace(/ at line \d+, column \d+:?$/, '');
          const hint = e.code === 'DUPLICATE_KEY' ? '; each key (e.g. an axis) may appear once' : '';
          return new UserInputError(`YAML: ${reason}${hint}`, {
            location: { file, ...(pos ? { line: pos.line, column: pos.col } : {}) },
            code: 'E_GRID_YAML',
          });
        }),
      );
    }
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
        node = options.key && i === path.length - 1 ? pair.key : pair.value ?? pair.key;
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

/** `axes.visibility[0]` for ['axes', 'visibility', 0]: how messages name a field. */
export function formatPath(path: GridPath): string {
  let out = '';
  for (const segment of path) {
    if (typeof segment === 'number') out += `[${segment}]`;
    else out += out === '' ? segment : `.${segment}`;
  }
  return out === '' ? '(grid)' : out;
}
