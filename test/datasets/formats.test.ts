import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { createHash } from 'node:crypto';
import { parquetWriteBuffer } from 'hyparquet-writer';
import { afterAll, describe, expect, it } from 'vitest';
import { DatasetError, formatOfName, readDataFile } from '../../src/datasets/index.js';
import { readCardText } from '../../src/datasets/formats.js';

const root = mkdtempSync(join(tmpdir(), 'canary-formats-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

function file(name: string, content: string | Uint8Array): string {
  const path = join(root, name);
  writeFileSync(path, content);
  return path;
}

async function failure(path: string, format?: 'jsonl' | 'json' | 'csv' | 'parquet'): Promise<DatasetError> {
  const error = await readDataFile(path, path, format).catch((e: unknown) => e);
  expect(error).toBeInstanceOf(DatasetError);
  return error as DatasetError;
}

describe('data files through the read boundary', () => {
  it('a FIFO and a link to /dev/zero are refused at once, in every format, not waited on or read without end', async () => {
    for (const format of ['jsonl', 'parquet'] as const) {
      const fifo = join(root, `pipe.${format}`);
      execFileSync('mkfifo', [fifo]);
      expect((await failure(fifo, format)).message).toMatch(
        new RegExp(`pipe\\.${format}: dataset file is a FIFO \\(named pipe\\), not a regular file; not read`),
      );
      const zero = join(root, `zero.${format}`);
      symlinkSync('/dev/zero', zero);
      expect((await failure(zero, format)).message).toMatch(
        new RegExp(`zero\\.${format}: dataset file is a character device, not a regular file; not read`),
      );
    }
    expect((await failure(join(root, 'gone.jsonl'))).message).toMatch(
      /gone\.jsonl: cannot be read \(ENOENT\); check the file exists/,
    );
    // The card too: a README.md that is a FIFO is refused, not waited on.
    execFileSync('mkfifo', [join(root, 'README.md')]);
    expect(() => readCardText(join(root, 'README.md'))).toThrow(
      /README\.md: dataset card is a FIFO \(named pipe\), not a regular file/,
    );
  }, 10_000);
});

describe('data file formats', () => {
  it('knows the formats by extension', () => {
    expect(['a.jsonl', 'a.JSON', 'd/b.csv', 'c.parquet', 'x.txt', 'noext'].map(formatOfName)).toEqual([
      'jsonl',
      'json',
      'csv',
      'parquet',
      null,
      null,
    ]);
  });

  it('JSON Lines: one object per line, blank lines skipped; sha256 and size of the bytes', async () => {
    const text = '{"text": "a", "label": 1}\n\n{"text": "b", "label": 2}\r\n';
    const got = await readDataFile(file('a.jsonl', text), 'a.jsonl', undefined);
    expect(got.records).toEqual([
      { text: 'a', label: 1 },
      { text: 'b', label: 2 },
    ]);
    expect(got.sha256).toBe(createHash('sha256').update(text).digest('hex'));
    expect(got.bytes).toBe(Buffer.byteLength(text));
  });

  it('JSON Lines errors name the file, line and column', async () => {
    const bad = file('bad.jsonl', '{"a": 1}\n{"a": 2,}\n');
    expect((await failure(bad)).message).toMatch(
      new RegExp(
        `^${bad}: line 2, column 9: not valid JSON \\(.*\\); each line of a \\.jsonl file is one JSON object$`,
      ),
    );
    const arr = file('arr.jsonl', '[1, 2]\n');
    expect((await failure(arr)).message).toBe(
      `${arr}: line 1: a JSON array, not an object; each line of a .jsonl file is one record {"column": value, ...}`,
    );
  });

  it('JSON: a top-level array, an object`s data array or its one array field, or JSON Lines under .json', async () => {
    expect((await readDataFile(file('a.json', '[{"x": 1}, {"x": 2}]'), 'a', undefined)).records).toEqual([
      { x: 1 },
      { x: 2 },
    ]);
    expect(
      (await readDataFile(file('b.json', '{"version": "1", "data": [{"x": 1}], "other": []}'), 'b', undefined)).records,
    ).toEqual([{ x: 1 }]);
    expect((await readDataFile(file('c.json', '{"rows": [{"x": 3}]}'), 'c', undefined)).records).toEqual([{ x: 3 }]);
    expect((await readDataFile(file('d.json', '{"x": 1}\n{"x": 2}\n'), 'd', undefined)).records).toEqual([
      { x: 1 },
      { x: 2 },
    ]);
  });

  it('JSON errors: truncated, several arrays, not records', async () => {
    const cut = file('cut.json', '[{"x": 1},\n {"x": ');
    expect((await failure(cut)).message).toMatch(
      new RegExp(
        `^${cut}: line 2, column 8: not valid JSON .*; the file is damaged or truncated — fetch or export it again$`,
      ),
    );
    const two = file('two.json', '{"a": [], "b": []}');
    expect((await failure(two)).message).toBe(
      `${two}: a JSON object with several array fields (a, b); the records must be a top-level array, or an object's \`data\` array`,
    );
    const nums = file('nums.json', '[1, 2]');
    expect((await failure(nums)).message).toBe(
      `${nums}: record 0 is a JSON number, not an object; the records must be objects {"column": value, ...}`,
    );
  });

  it('CSV through the same entry point, and a format named by the source overrides the extension', async () => {
    expect((await readDataFile(file('a.csv', 'text,label\r\n"x, y",1\r\n'), 'a', undefined)).records).toEqual([
      { text: 'x, y', label: 1 },
    ]);
    expect((await readDataFile(file('rows.txt', '{"x": 1}\n'), 'rows.txt', 'jsonl')).records).toEqual([{ x: 1 }]);
    const unknown = await failure(file('rows.dat', 'x'));
    expect(unknown.code).toBe('E_DATASET_SOURCE');
    expect(unknown.field).toBe('source.format');
  });

  it('text that is not UTF-8 is named as such', async () => {
    const bin = file('bin.jsonl', new Uint8Array([0xff, 0xfe, 0x00, 0x41]));
    expect((await failure(bin)).message).toMatch(/is not UTF-8 text/);
  });
});

describe('Parquet', () => {
  const columns = [
    { name: 'text', data: ['a', 'b'], type: 'STRING' as const },
    { name: 'label', data: [BigInt(3), BigInt(76)], type: 'INT64' as const },
    { name: 'big', data: [BigInt('9007199254740993'), BigInt(-5)], type: 'INT64' as const },
  ];

  it('reads snappy pages (the default of datasets and of the writer), 64-bit integers as numbers, past 2^53 as text', async () => {
    const path = file('a.parquet', new Uint8Array(parquetWriteBuffer({ columnData: columns })));
    const got = await readDataFile(path, 'a.parquet', undefined);
    expect(got.records).toEqual([
      { text: 'a', label: 3, big: '9007199254740993' },
      { text: 'b', label: 76, big: -5 },
    ]);
    expect(got.features).toBeNull();
  });

  it('reads gzip pages too, and the class labels datasets writes into the file metadata', async () => {
    const features = { text: { dtype: 'string', _type: 'Value' }, label: { names: ['x', 'y'], _type: 'ClassLabel' } };
    const buffer = parquetWriteBuffer({
      columnData: columns.slice(0, 2),
      codec: 'GZIP',
      compressors: { GZIP: (input: Uint8Array) => new Uint8Array(gzipSync(input)) },
      kvMetadata: [{ key: 'huggingface', value: JSON.stringify({ info: { features } }) }],
    });
    const got = await readDataFile(file('g.parquet', new Uint8Array(buffer)), 'g.parquet', undefined);
    expect(got.records).toEqual([
      { text: 'a', label: 3 },
      { text: 'b', label: 76 },
    ]);
    expect(got.features).toEqual({ label: { names: ['x', 'y'] } });
  });

  it('names a codec it cannot read, and a damaged file', async () => {
    // LZ4 pages (bytes left as they are: the reader must refuse before decoding them).
    const lz4 = parquetWriteBuffer({
      columnData: columns.slice(0, 1),
      codec: 'LZ4',
      compressors: { LZ4: (input: Uint8Array) => input },
    });
    const path = file('lz4.parquet', new Uint8Array(lz4));
    expect((await failure(path)).message).toBe(
      `${path}: parquet unsupported compression codec: LZ4; its pages are LZ4-compressed, which this reader lacks; rewrite it with snappy, gzip or no compression (pyarrow: pq.write_table(t, path, compression="snappy"))`,
    );
    const whole = new Uint8Array(parquetWriteBuffer({ columnData: columns }));
    const cut = file('cut.parquet', whole.subarray(0, whole.length - 20));
    const error = await failure(cut);
    expect(error.code).toBe('E_DATASET_FILE');
    expect(error.file).toBe(cut);
    expect(error.message).toMatch(
      new RegExp(
        `^${cut}: .*; it is not a readable Parquet file \\(damaged or truncated\\); fetch or export it again$`,
      ),
    );
  });
});
