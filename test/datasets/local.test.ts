import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { DatasetError, loadTaskData } from '../../src/datasets/index.js';
import type { DatasetSourceSpec } from '../../src/contracts/index.js';
import { BANKING77_LABELS, FIXTURES_DIR } from '../fixtures/datasets/build.js';

const grid = mkdtempSync(join(tmpdir(), 'canary-local-ds-'));
afterAll(() => rmSync(grid, { recursive: true, force: true }));

function put(path: string, content: string): string {
  const full = join(grid, path);
  mkdirSync(dirname(full), { recursive: true });
  writeFileSync(full, content);
  return full;
}

const sha = (path: string): string => createHash('sha256').update(readFileSync(path)).digest('hex');

async function failure(source: DatasetSourceSpec, splits: string[]): Promise<DatasetError> {
  const error = await loadTaskData(source, splits, { gridDir: grid }).catch((e: unknown) => e);
  expect(error).toBeInstanceOf(DatasetError);
  return error as DatasetError;
}

describe('local datasets', () => {
  it('a folder laid out like PolyAI/banking77: splits by the card, class labels, provenance with each file`s sha256', async () => {
    const dir = join(FIXTURES_DIR, 'banking77-mini');
    const data = await loadTaskData({ path: dir }, ['train', 'test'], { gridDir: grid });
    expect(data.splits.train).toHaveLength(480);
    expect(data.splits.test).toHaveLength(96);
    expect(data.splits.train?.[0]).toEqual({ text: expect.any(String), label: expect.any(Number) });
    expect(data.features).toEqual({ label: { names: [...BANKING77_LABELS] } });
    const train = join(dir, 'data', 'train-00000-of-00001.parquet');
    const test = join(dir, 'data', 'test-00000-of-00001.parquet');
    expect(data.provenance).toEqual({
      source: 'local',
      path: dir,
      config: null,
      files: [
        { split: 'train', path: train, sha256: sha(train), bytes: readFileSync(train).length },
        { split: 'test', path: test, sha256: sha(test), bytes: readFileSync(test).length },
      ],
    });
  });

  it('a folder like next-tat/TAT-QA: splits by file name, one record per document', async () => {
    const data = await loadTaskData({ path: join(FIXTURES_DIR, 'tat-qa-mini') }, ['train', 'validation'], {
      gridDir: grid,
    });
    expect([data.splits.train?.length, data.splits.validation?.length]).toEqual([12, 4]);
    expect(Object.keys(data.splits.train?.[0] ?? {})).toEqual(['table', 'paragraphs', 'questions']);
    expect(data.features).toEqual({});
    expect(data.provenance.files.map((f) => [f.split, f.path.split('/').pop()])).toEqual([
      ['train', 'tatqa_dataset_train.json'],
      ['validation', 'tatqa_dataset_dev.json'],
    ]);
  });

  it('class labels from a Parquet file`s own metadata when there is no card', async () => {
    const data = await loadTaskData({ path: join(FIXTURES_DIR, 'banking77-mini', 'data') }, ['train', 'test'], {
      gridDir: grid,
    });
    expect(data.features.label?.names).toHaveLength(77);
    expect(data.features.label?.names?.[53]).toBe('reverted_card_payment?');
  });

  it('a path relative to the grid folder; a single file is the train split; files in name order', async () => {
    put('one/rows.jsonl', '{"x": 1}\n{"x": 2}\n');
    const single = await loadTaskData({ path: 'one/rows.jsonl' }, ['train'], { gridDir: grid });
    expect(single.splits).toEqual({ train: [{ x: 1 }, { x: 2 }] });
    expect(single.provenance).toMatchObject({ source: 'local', path: join(grid, 'one', 'rows.jsonl') });
    put('shards/train/b.csv', 'x\n3\n');
    put('shards/train/a.csv', 'x\n1\n2\n');
    put('shards/test/a.jsonl', '{"x": 9}\n');
    const shards = await loadTaskData({ path: 'shards' }, ['train', 'test'], { gridDir: grid });
    expect(shards.splits).toEqual({ train: [{ x: 1 }, { x: 2 }, { x: 3 }], test: [{ x: 9 }] });
  });

  it('the source`s files and format decide over names', async () => {
    put('custom/part-a.txt', '{"t": "a"}\n');
    put('custom/part-b.txt', '{"t": "b"}\n');
    put('custom/eval-set.txt', '{"t": "e"}\n');
    // format without files: the naming conventions over every file but docs and licences.
    put('plain/rows.txt', '{"t": "r"}\n');
    put('plain/LICENSE', 'CC-BY-4.0\n');
    put('plain/notes.md', '# notes\n');
    expect((await loadTaskData({ path: 'plain', format: 'jsonl' }, ['train'], { gridDir: grid })).splits).toEqual({
      train: [{ t: 'r' }],
    });
    // As in datasets: once a file names a split (eval → test), files that name none are in no split.
    expect((await loadTaskData({ path: 'custom', format: 'jsonl' }, ['test'], { gridDir: grid })).splits).toEqual({
      test: [{ t: 'e' }],
    });
    expect((await failure({ path: 'custom', format: 'jsonl' }, ['train'])).message).toMatch(
      /has no split "train" \(no file or folder is named for it\); its splits: test;/,
    );
    const data = await loadTaskData(
      { path: 'custom', files: { train: 'part-*', heldout: ['eval-set.txt'] }, format: 'jsonl' },
      ['train', 'heldout'],
      { gridDir: grid },
    );
    expect(data.splits).toEqual({ train: [{ t: 'a' }, { t: 'b' }], heldout: [{ t: 'e' }] });
  });

  it('a split asked for but not there names the split, the source and the splits there are', async () => {
    const error = await failure({ path: join(FIXTURES_DIR, 'banking77-mini') }, ['train', 'validation']);
    expect(error.code).toBe('E_DATASET_SPLIT');
    expect(error.exitCode).toBe(2);
    expect(error.message).toBe(
      `local dataset ${join(FIXTURES_DIR, 'banking77-mini')} has no split "validation": the card's config "default" declares no such split; its splits: train, test; name its files in source.files.validation`,
    );
  });

  it('an empty split is an error naming its files', async () => {
    put('empty/train.csv', 'text,label\n');
    put('empty/test.csv', 'text,label\nhello,1\n');
    const error = await failure({ path: 'empty' }, ['train', 'test']);
    expect([error.code, error.field, error.split]).toEqual(['E_DATASET_EMPTY_SPLIT', 'source.files.train', 'train']);
    expect(error.message).toBe(
      `split "train" of local dataset ${join(grid, 'empty')} is empty: ${join(grid, 'empty', 'train.csv')} holds no rows; check the file, or name other files in source.files.train`,
    );
  });

  it('a corrupt file is named', async () => {
    const bad = put('corrupt/train.parquet', 'PAR1 this is not parquet PAR1');
    const error = await failure({ path: 'corrupt' }, ['train']);
    expect(error.code).toBe('E_DATASET_FILE');
    expect(error.file).toBe(bad);
    expect(error.message.startsWith(`${bad}: `)).toBe(true);
  });

  it('a bad source: no such path, both or neither of repo and path, files on a single file, a revision on a local path', async () => {
    const missing = await failure({ path: 'nope/data.jsonl' }, ['train']);
    expect([missing.code, missing.field, missing.message]).toEqual([
      'E_DATASET_SOURCE',
      'source.path',
      `no file or folder ${join(grid, 'nope', 'data.jsonl')} (source.path is relative to the grid file's folder, ${grid})`,
    ]);
    expect((await failure({ repo: 'a/b', path: 'x' }, ['train'])).field).toBe('source');
    expect((await failure({}, ['train'])).message).toMatch(/^names no data: give repo/);
    expect((await failure({ path: 'one/rows.jsonl', files: { train: '*' } }, ['train'])).field).toBe('source.files');
    expect((await failure({ path: 'one', revision: 'main' }, ['train'])).field).toBe('source.revision');
    expect((await failure({ repo: '../local/folder' }, ['train'])).field).toBe('source.repo');
    expect((await failure({ path: 'one', files: { train: 3 as unknown as string } }, ['train'])).field).toBe(
      'source.files.train',
    );
  });
});
