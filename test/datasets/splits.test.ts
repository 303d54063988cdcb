import { describe, expect, it } from 'vitest';
import {
  byNames,
  cardFeatures,
  chooseConfig,
  DatasetError,
  globToRegExp,
  matchGlob,
  parseCard,
  resolveSplits,
} from '../../src/datasets/index.js';

const fail = (fn: () => unknown): DatasetError => {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(DatasetError);
    return error as DatasetError;
  }
  throw new Error('expected an error');
};

describe('globs over repository paths', () => {
  it('* and ? stay in one part, ** spans parts (or none), classes match one character', () => {
    const paths = [
      'data/train-00000-of-00002.parquet',
      'data/train-00001-of-00002.parquet',
      'data/test-00000-of-00001.parquet',
      'data/sub/train-x.parquet',
      'train.jsonl',
    ];
    expect(matchGlob('data/train-*', paths)).toEqual([
      'data/train-00000-of-00002.parquet',
      'data/train-00001-of-00002.parquet',
    ]);
    expect(matchGlob('**/train-*', paths)).toEqual([
      'data/sub/train-x.parquet',
      'data/train-00000-of-00002.parquet',
      'data/train-00001-of-00002.parquet',
    ]);
    expect(matchGlob('**/*.jsonl', paths)).toEqual(['train.jsonl']);
    expect(matchGlob('data/t?st-*', paths)).toEqual(['data/test-00000-of-00001.parquet']);
    expect(matchGlob('data/train-0000[1-9]-*', paths)).toEqual(['data/train-00001-of-00002.parquet']);
    expect(matchGlob('./train.jsonl', paths)).toEqual(['train.jsonl']);
    expect(globToRegExp('a.b+c').test('a.b+c')).toBe(true);
    expect(globToRegExp('a.b+c').test('axb+c')).toBe(false);
  });
});

describe('splits by the Hub`s naming conventions', () => {
  it('sharded files under data/ give any split name', () => {
    expect(
      byNames([
        'data/train-00000-of-00002.parquet',
        'data/train-00001-of-00002.parquet',
        'data/holdout-00000-of-00001.parquet',
      ]),
    ).toEqual({
      train: ['data/train-00000-of-00002.parquet', 'data/train-00001-of-00002.parquet'],
      holdout: ['data/holdout-00000-of-00001.parquet'],
    });
  });

  it('folders named by a split keyword, before file names', () => {
    expect(
      byNames(['train/a.jsonl', 'train/b.jsonl', 'data/dev/x.jsonl', 'my-test/y.csv', 'extra_test.jsonl']),
    ).toEqual({
      train: ['train/a.jsonl', 'train/b.jsonl'],
      validation: ['data/dev/x.jsonl'],
      test: ['my-test/y.csv'],
    });
  });

  it('file names with a keyword between separators (TAT-QA`s *_train.json, *-test-*), else everything is train', () => {
    expect(byNames(['tatqa_dataset_train.json', 'tatqa_dataset_dev.json', 'tatqa_dataset_test.json'])).toEqual({
      train: ['tatqa_dataset_train.json'],
      validation: ['tatqa_dataset_dev.json'],
      test: ['tatqa_dataset_test.json'],
    });
    expect(byNames(['train.jsonl', 'x-test-0.csv', 'interval.json'])).toEqual({
      train: ['train.jsonl'],
      test: ['x-test-0.csv'],
    });
    expect(byNames(['rows.jsonl', 'more.jsonl'])).toEqual({ train: ['rows.jsonl', 'more.jsonl'] });
    expect(byNames([])).toEqual({});
  });

  it('a split asked for by a keyword of its group finds the group`s files, keyed as asked; README and hidden files are never data', () => {
    const listing = ['.gitattributes', 'README.md', 'tatqa_dataset_train.json', 'tatqa_dataset_dev.json'];
    const got = resolveSplits(listing, { splits: ['train', 'dev'], config: null }, 'dataset next-tat/TAT-QA@main');
    expect(got).toEqual({
      bySplit: { train: ['tatqa_dataset_train.json'], dev: ['tatqa_dataset_dev.json'] },
      available: ['train', 'validation'],
      basis: 'names',
    });
    expect(resolveSplits(listing, { splits: ['validation'], config: null }, 'x').bySplit).toEqual({
      validation: ['tatqa_dataset_dev.json'],
    });
  });

  it('a missing split names itself, the source and the splits there are', () => {
    const error = fail(() =>
      resolveSplits(['train.jsonl', 'test.jsonl'], { splits: ['validation'], config: null }, 'local dataset /d'),
    );
    expect(error.code).toBe('E_DATASET_SPLIT');
    expect(error.split).toBe('validation');
    expect(error.field).toBe('source.files.validation');
    expect(error.message).toBe(
      'local dataset /d has no split "validation" (no file or folder is named for it); its splits: train, test; name its files in source.files.validation',
    );
  });
});

const CARD = `---
license: cc-by-4.0
dataset_info:
  features:
  - name: text
    dtype: string
  - name: label
    dtype:
      class_label:
        names:
          '0': activate_my_card
          '1': age_limit
          '2': reverted_card_payment?
configs:
- config_name: default
  data_files:
  - split: train
    path: data/train-*
  - split: test
    path: data/test-*
---

# Card
`;

describe('the dataset card', () => {
  it('reads configs and class labels in the dict form', () => {
    const card = parseCard(CARD, 'README.md');
    expect(card.configs).toEqual([
      { name: 'default', isDefault: false, dataFiles: { train: ['data/train-*'], test: ['data/test-*'] } },
    ]);
    expect(cardFeatures(card, 'default')).toEqual({
      label: { names: ['activate_my_card', 'age_limit', 'reverted_card_payment?'] },
    });
  });

  it('reads a list of names, one dataset_info per config, and every data_files form', () => {
    const card = parseCard(
      `---
dataset_info:
- config_name: en
  features:
  - name: label
    class_label:
      names: [neg, pos]
- config_name: fr
  features:
    label:
      dtype:
        class_label:
          names: {0: négatif, 1: positif}
configs:
- config_name: en
  data_files: en/*.csv
- config_name: fr
  default: true
  data_files: {train: fr/train.csv, test: [fr/test-a.csv, fr/test-b.csv]}
- config_name: all
  data_files: ["en/*.csv", "fr/*.csv"]
---
`,
      'README.md',
    );
    expect(card.configs.map((c) => [c.name, c.isDefault, c.dataFiles])).toEqual([
      ['en', false, { train: ['en/*.csv'] }],
      ['fr', true, { train: ['fr/train.csv'], test: ['fr/test-a.csv', 'fr/test-b.csv'] }],
      ['all', false, { train: ['en/*.csv', 'fr/*.csv'] }],
    ]);
    expect(chooseConfig(card, undefined, 'x')?.name).toBe('fr');
    expect(chooseConfig(card, 'en', 'x')?.name).toBe('en');
    expect(cardFeatures(card, 'en')).toEqual({ label: { names: ['neg', 'pos'] } });
    expect(cardFeatures(card, 'fr')).toEqual({ label: { names: ['négatif', 'positif'] } });
    expect(cardFeatures(card, 'all')).toBeNull();
  });

  it('chooses default, else the first config; an unknown config is an error at source.config', () => {
    const two = parseCard(
      '---\nconfigs:\n- config_name: a\n  data_files: a.csv\n- config_name: default\n  data_files: d.csv\n---\n',
      'README.md',
    );
    expect(chooseConfig(two, undefined, 'x')?.name).toBe('default');
    const first = parseCard(
      '---\nconfigs:\n- config_name: a\n  data_files: a.csv\n- config_name: b\n  data_files: b.csv\n---\n',
      'README.md',
    );
    expect(chooseConfig(first, undefined, 'x')?.name).toBe('a');
    const error = fail(() => chooseConfig(first, 'c', 'dataset org/x@main'));
    expect([error.code, error.field, error.message]).toEqual([
      'E_DATASET_SOURCE',
      'source.config',
      'dataset org/x@main has no config "c"; its configs: a, b',
    ]);
    expect(chooseConfig(parseCard('# no front matter\n', 'README.md'), undefined, 'x')).toBeNull();
  });

  it('splits by the card`s data_files; a pattern that matches nothing is a missing split', () => {
    const card = parseCard(CARD, 'README.md');
    const config = chooseConfig(card, undefined, 'x');
    const listing = [
      'README.md',
      'data/train-00000-of-00002.parquet',
      'data/train-00001-of-00002.parquet',
      'data/test-00000-of-00001.parquet',
      'train.jsonl',
    ];
    expect(resolveSplits(listing, { splits: ['train'], config }, 'x')).toEqual({
      bySplit: { train: ['data/train-00000-of-00002.parquet', 'data/train-00001-of-00002.parquet'] },
      available: ['train', 'test'],
      basis: 'card',
    });
    const error = fail(() =>
      resolveSplits(
        ['README.md', 'data/train-00000-of-00001.parquet'],
        { splits: ['train', 'test'], config },
        'dataset PolyAI/banking77@main',
      ),
    );
    expect(error.message).toBe(
      'dataset PolyAI/banking77@main has no split "test": the card\'s config "default" gives it the files "data/test-*", which match no file; its splits: train; name its files in source.files.test',
    );
  });

  it('the source`s files override the card, globs included', () => {
    const config = chooseConfig(parseCard(CARD, 'README.md'), undefined, 'x');
    const listing = ['data/train-00000-of-00001.parquet', 'data/test-00000-of-00001.parquet', 'extra/holdout.jsonl'];
    const got = resolveSplits(
      listing,
      { splits: ['train', 'holdout'], config, files: { train: 'data/t*-00000-*', holdout: ['extra/*.jsonl'] } },
      'x',
    );
    expect(got.bySplit).toEqual({
      train: ['data/test-00000-of-00001.parquet', 'data/train-00000-of-00001.parquet'],
      holdout: ['extra/holdout.jsonl'],
    });
    expect(got.basis).toBe('files');
    const none = fail(() =>
      resolveSplits(listing, { splits: ['train'], config, files: { train: 'nope/*' } }, 'local dataset /d'),
    );
    expect([none.field, none.message]).toEqual([
      'source.files.train',
      'local dataset /d has no split "train": source.files.train ("nope/*") matches no file; no split has any file',
    ]);
  });

  it('a card whose YAML does not parse names the card and the line', () => {
    const error = fail(() =>
      parseCard('---\nconfigs:\n  - config_name: a\n   bad: [\n---\n', 'README.md of org/x@abc'),
    );
    expect(error.code).toBe('E_DATASET_FILE');
    expect(error.message).toMatch(
      /^README\.md of org\/x@abc: line 4: the card's YAML front matter does not parse \(Sequence item without - indicator\); fix the card/,
    );
  });
});
