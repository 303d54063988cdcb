import { badFile } from './errors.js';
import type { DatasetRecord } from '../contracts/index.js';

/**
 * CSV as RFC 4180 writes it: fields separated by commas, records by CRLF (LF and CR alone are
 * accepted too), a field in double quotes may hold commas, line breaks and doubled quotes (`""`).
 * A byte-order mark is dropped, blank lines are skipped, a final line break is optional.
 */
export interface CsvRow {
  /** 1-based line the record starts on. */
  line: number;
  fields: string[];
}

export function parseCsv(text: string, file: string): CsvRow[] {
  const rows: CsvRow[] = [];
  const s = text.startsWith('\uFEFF') ? text.slice(1) : text;
  let line = 1;
  let i = 0;
  while (i < s.length) {
    const start = line;
    const fields: string[] = [];
    let blank = true;
    for (;;) {
      let value = '';
      if (s[i] === '"') {
        blank = false;
        const open = line;
        i += 1;
        for (;;) {
          if (i >= s.length)
            throw badFile(
              file,
              `line ${open}: the quoted field opened there is never closed; close it with a double quote (a quote inside a field is written "")`,
            );
          const c = s[i] as string;
          if (c === '"') {
            if (s[i + 1] === '"') {
              value += '"';
              i += 2;
              continue;
            }
            i += 1;
            break;
          }
          if (c === '\n' || (c === '\r' && s[i + 1] !== '\n')) line += 1;
          value += c;
          i += 1;
        }
        const next = s[i];
        if (next !== undefined && next !== ',' && next !== '\n' && next !== '\r') {
          throw badFile(
            file,
            `line ${line}: ${JSON.stringify(next)} after the closing quote of a field; a quoted field ends at a comma or line break (a quote inside it is written "")`,
          );
        }
      } else {
        while (i < s.length && s[i] !== ',' && s[i] !== '\n' && s[i] !== '\r') {
          value += s[i];
          i += 1;
        }
        if (value !== '') blank = false;
      }
      fields.push(value);
      if (s[i] === ',') {
        blank = false;
        i += 1;
        continue;
      }
      // End of record: CRLF, LF, CR or the end of the text.
      if (s[i] === '\r') i += s[i + 1] === '\n' ? 2 : 1;
      else if (s[i] === '\n') i += 1;
      line += 1;
      break;
    }
    if (!blank) rows.push({ line: start, fields });
  }
  return rows;
}

const NUMBER = /^[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?$/;
const INTEGER = /^[-+]?\d+$/;

/**
 * Records from a CSV file whose first row names the columns. A column whose every non-empty value
 * is a number (integers within 2^53) is read as numbers, its empty fields as null, like pandas
 * (and so `datasets`) infers it; every other column stays text.
 */
export function csvRecords(text: string, file: string): DatasetRecord[] {
  const rows = parseCsv(text, file);
  const header = rows.shift();
  if (!header) return [];
  const names = header.fields;
  const seen = new Set<string>();
  for (const name of names) {
    if (seen.has(name))
      throw badFile(
        file,
        `line ${header.line}: the header names column ${JSON.stringify(name)} twice; give each column its own name`,
      );
    seen.add(name);
  }
  for (const row of rows) {
    if (row.fields.length !== names.length) {
      throw badFile(
        file,
        `line ${row.line}: ${row.fields.length} field(s), the header has ${names.length}; quote a field that holds a comma ("a, b")`,
      );
    }
  }
  const numeric = names.map(
    (_, c) =>
      rows.every((row) => {
        const v = row.fields[c] as string;
        return v === '' || (NUMBER.test(v) && (!INTEGER.test(v) || Number.isSafeInteger(Number(v))));
      }) && rows.some((row) => row.fields[c] !== ''),
  );
  return rows.map((row) => {
    const record: DatasetRecord = {};
    names.forEach((name, c) => {
      const v = row.fields[c] as string;
      record[name] = numeric[c] ? (v === '' ? null : Number(v)) : v;
    });
    return record;
  });
}
