import { describe, expect, it } from 'vitest';
import { csvRecords, DatasetError, parseCsv } from '../../src/datasets/index.js';

const fields = (text: string): string[][] => parseCsv(text, 'x.csv').map((r) => r.fields);
const fail = (fn: () => unknown): DatasetError => {
  try {
    fn();
  } catch (error) {
    return error as DatasetError;
  }
  throw new Error('expected an error');
};

describe('CSV (RFC 4180)', () => {
  it('splits plain fields and records, with or without a final line break', () => {
    expect(fields('a,b,c\n1,2,3\n')).toEqual([
      ['a', 'b', 'c'],
      ['1', '2', '3'],
    ]);
    expect(fields('a,b,c\n1,2,3')).toEqual([
      ['a', 'b', 'c'],
      ['1', '2', '3'],
    ]);
    expect(fields('a,,c\n,,\n')).toEqual([
      ['a', '', 'c'],
      ['', '', ''],
    ]);
  });

  it('reads quoted fields holding commas, doubled quotes and line breaks', () => {
    const text = 'text,label\n"Hello, world",1\n"She said ""hi""",2\n"line one\nline two",3\n"",4\n';
    expect(fields(text)).toEqual([
      ['text', 'label'],
      ['Hello, world', '1'],
      ['She said "hi"', '2'],
      ['line one\nline two', '3'],
      ['', '4'],
    ]);
  });

  it('takes CRLF, lone CR and LF record ends, keeps a CRLF inside quotes, drops a BOM and blank lines', () => {
    expect(fields('\uFEFFa,b\r\n1,"x\r\ny"\r\n\r\n2,z\r3,w\r\n')).toEqual([
      ['a', 'b'],
      ['1', 'x\r\ny'],
      ['2', 'z'],
      ['3', 'w'],
    ]);
  });

  it('numbers each record by the line it starts on', () => {
    expect(parseCsv('a,b\n"1\n2",3\n4,5\n', 'x.csv').map((r) => r.line)).toEqual([1, 2, 4]);
  });

  it('names the file and line of an unclosed quote or text after a closing quote', () => {
    const open = fail(() => parseCsv('a,b\n1,"never closed\n2,3\n', 'data/train.csv'));
    expect(open).toBeInstanceOf(DatasetError);
    expect(open.code).toBe('E_DATASET_FILE');
    expect(open.message).toBe(
      'data/train.csv: line 2: the quoted field opened there is never closed; close it with a double quote (a quote inside a field is written "")',
    );
    const after = fail(() => parseCsv('a,b\n"x"y,1\n', 'f.csv'));
    expect(after.message).toMatch(/^f\.csv: line 2: "y" after the closing quote of a field/);
  });
});

describe('CSV records', () => {
  it('names columns by the header and reads all-number columns as numbers (empty: null), others as text', () => {
    const rows = csvRecords('text,label,score,code\n"a, b",3,0.5,007\nc,12,,x1\n', 'f.csv');
    expect(rows).toEqual([
      { text: 'a, b', label: 3, score: 0.5, code: '007' },
      { text: 'c', label: 12, score: null, code: 'x1' },
    ]);
  });

  it('keeps integers past 2^53 as text rather than rounding them', () => {
    expect(csvRecords('id\n9007199254740993\n1\n', 'f.csv')).toEqual([{ id: '9007199254740993' }, { id: '1' }]);
  });

  it('a header alone is no rows; a record with a wrong field count or a repeated column name is an error', () => {
    expect(csvRecords('a,b\n', 'f.csv')).toEqual([]);
    expect(fail(() => csvRecords('a,b\n1,2\n3,4,5\n', 'f.csv')).message).toBe(
      'f.csv: line 3: 3 field(s), the header has 2; quote a field that holds a comma ("a, b")',
    );
    expect(fail(() => csvRecords('a,a\n1,2\n', 'f.csv')).message).toMatch(
      /^f\.csv: line 1: the header names column "a" twice/,
    );
  });
});
