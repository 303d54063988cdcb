import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadTaskData } from '../../src/datasets/index.js';
import { BANKING77_LABELS, FIXTURES_DIR, fixtureFiles } from '../fixtures/datasets/build.js';

/** The committed fixtures are exactly what build.ts writes, and hold what the tests rely on. */
function committed(): string[] {
  const out: string[] = [];
  const walk = (dir: string): void => {
    for (const name of readdirSync(dir)) {
      const full = join(dir, name);
      if (statSync(full).isDirectory()) walk(full);
      else if (full !== join(FIXTURES_DIR, 'build.ts')) out.push(relative(FIXTURES_DIR, full));
    }
  };
  walk(FIXTURES_DIR);
  return out.sort();
}

describe('dataset fixtures', () => {
  it('rebuilding gives byte-identical files, and no other file sits beside them (npx tsx test/fixtures/datasets/build.ts)', () => {
    const built = fixtureFiles();
    expect(committed()).toEqual(Object.keys(built).sort());
    for (const [path, bytes] of Object.entries(built)) {
      expect(
        Buffer.from(bytes).equals(readFileSync(join(FIXTURES_DIR, path))),
        `${path} differs from what build.ts writes; rerun it and commit`,
      ).toBe(true);
    }
  });

  it('banking77-mini: the 77 intent names in order, 8 intents with 60 train and 12 test rows each, 40-90 characters, no test row in train', async () => {
    expect(BANKING77_LABELS).toHaveLength(77);
    expect([
      BANKING77_LABELS[0],
      BANKING77_LABELS[11],
      BANKING77_LABELS[51],
      BANKING77_LABELS[53],
      BANKING77_LABELS[76],
    ]).toEqual([
      'activate_my_card',
      'card_arrival',
      'Refund_not_showing_up',
      'reverted_card_payment?',
      'wrong_exchange_rate_for_cash_withdrawal',
    ]);
    const data = await loadTaskData({ path: join(FIXTURES_DIR, 'banking77-mini') }, ['train', 'test'], {
      gridDir: FIXTURES_DIR,
    });
    const rows = (split: string) => (data.splits[split] ?? []) as { text: string; label: number }[];
    const count = (split: string) =>
      rows(split).reduce<Record<string, number>>(
        (acc, r) => ({
          // biome-ignore lint/performance/noAccumulatingSpread: a few hundred fixture rows
          ...acc,
          [BANKING77_LABELS[r.label] as string]: (acc[BANKING77_LABELS[r.label] as string] ?? 0) + 1,
        }),
        {},
      );
    expect(Object.values(count('train'))).toEqual(Array(8).fill(60));
    expect(Object.values(count('test'))).toEqual(Array(8).fill(12));
    expect(Object.keys(count('test')).sort()).toEqual(Object.keys(count('train')).sort());
    for (const r of [...rows('train'), ...rows('test')])
      expect(r.text.length >= 40 && r.text.length <= 90, r.text).toBe(true);
    const train = new Set(rows('train').map((r) => r.text));
    expect(rows('test').filter((r) => train.has(r.text))).toEqual([]);
  });

  it('banking77-mini is learnable from characters: character-trigram naive Bayes gets ≥ 95% of the test rows', async () => {
    const data = await loadTaskData({ path: join(FIXTURES_DIR, 'banking77-mini') }, ['train', 'test'], {
      gridDir: FIXTURES_DIR,
    });
    const grams = (t: string): string[] => {
      const s = ` ${t.toLowerCase()} `;
      return Array.from({ length: s.length - 2 }, (_, i) => s.slice(i, i + 3));
    };
    const counts = new Map<number, Map<string, number>>();
    const totals = new Map<number, number>();
    const vocab = new Set<string>();
    for (const r of data.splits.train as { text: string; label: number }[]) {
      const c = counts.get(r.label) ?? new Map<string, number>();
      for (const g of grams(r.text)) {
        c.set(g, (c.get(g) ?? 0) + 1);
        totals.set(r.label, (totals.get(r.label) ?? 0) + 1);
        vocab.add(g);
      }
      counts.set(r.label, c);
    }
    const predict = (t: string): number => {
      let best = -1;
      let bestScore = -Infinity;
      for (const [label, c] of counts) {
        const score = grams(t).reduce(
          (s, g) => s + Math.log(((c.get(g) ?? 0) + 1) / ((totals.get(label) ?? 0) + vocab.size)),
          0,
        );
        if (score > bestScore) [best, bestScore] = [label, score];
      }
      return best;
    };
    const test = data.splits.test as { text: string; label: number }[];
    const right = test.filter((r) => predict(r.text) === r.label).length;
    expect(right / test.length).toBeGreaterThanOrEqual(0.95);
  });

  it('tat-qa-mini: the original TAT-QA record layout', async () => {
    const data = await loadTaskData({ path: join(FIXTURES_DIR, 'tat-qa-mini') }, ['train', 'dev'], {
      gridDir: FIXTURES_DIR,
    });
    expect([data.splits.train?.length, data.splits.dev?.length]).toEqual([12, 4]);
    // biome-ignore lint/suspicious/noExplicitAny: the fixture's documents are read field by field, as a user's loader would
    for (const doc of [...(data.splits.train ?? []), ...(data.splits.dev ?? [])] as Record<string, any>[]) {
      expect(doc.table).toEqual({ uid: expect.stringMatching(/^[0-9a-f-]{36}$/), table: expect.any(Array) });
      expect(doc.table.table.every((row: unknown[]) => row.every((c) => typeof c === 'string'))).toBe(true);
      expect(doc.paragraphs.map((p: { order: number }) => p.order)).toEqual([1, 2, 3]);
      expect(doc.questions.length).toBeGreaterThanOrEqual(3);
      expect(doc.questions.length).toBeLessThanOrEqual(4);
      for (const q of doc.questions) {
        expect(Object.keys(q)).toEqual([
          'uid',
          'order',
          'question',
          'answer',
          'derivation',
          'answer_type',
          'answer_from',
          'rel_paragraphs',
          'req_comparison',
          'scale',
        ]);
        expect(['span', 'multi-span', 'arithmetic', 'count']).toContain(q.answer_type);
        expect(['table', 'text', 'table-text']).toContain(q.answer_from);
        expect(['', 'thousand', 'million', 'percent']).toContain(q.scale);
        if (q.answer_type === 'arithmetic') expect(typeof q.answer).toBe('number');
        else if (q.answer_type === 'count') expect(q.answer).toMatch(/^\d+$/);
        else expect(Array.isArray(q.answer) && q.answer.every((a: unknown) => typeof a === 'string')).toBe(true);
      }
    }
  });
});
