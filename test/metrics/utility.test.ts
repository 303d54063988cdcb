import { describe, expect, it } from 'vitest';
import { clusteredSample } from '../../src/metrics/bootstrap.js';
import { quantileSorted } from '../../src/metrics/statistics.js';
import {
  accuracyMatch,
  answerTokens,
  bootstrapMean,
  canonicalNumber,
  exactMatch,
  generationMetrics,
  normalizeAnswer,
  replyPoint,
  rowScores,
  tokenF1,
  utilityInterval,
} from '../../src/metrics/utility.js';
import { derivedSeed, Rng } from '../../src/random.js';

describe('accuracy', () => {
  it('is a strict match after trimming whitespace', () => {
    expect(accuracyMatch('  card_arrival\n', 'card_arrival')).toBe(true);
    expect(accuracyMatch('Card_arrival', 'card_arrival')).toBe(false);
    expect(accuracyMatch('card_arrival.', 'card_arrival')).toBe(false);
    expect(accuracyMatch('card arrival', 'card_arrival')).toBe(false);
    expect(accuracyMatch('', 'card_arrival')).toBe(false);
  });
});

describe('TAT-QA-style normalisation and exact match', () => {
  it('reads numbers as numbers, rounded to 4 decimals', () => {
    expect(canonicalNumber('1234.50')).toBe('1234.5');
    expect(canonicalNumber('007')).toBe('7');
    expect(canonicalNumber('-0.00001')).toBe('0');
    expect(canonicalNumber('0.123449')).toBe('0.1234');
    expect(canonicalNumber('2.')).toBe('2');
    expect(canonicalNumber('1e5')).toBeNull();
    expect(canonicalNumber('abc')).toBeNull();
  });

  it('lowercases, trims, collapses whitespace, drops a trailing period, thousands separators and currency signs', () => {
    expect(normalizeAnswer('  Net   Income.  ')).toEqual({ spans: ['net income'], scales: [] });
    expect(normalizeAnswer('$1,234.50')).toEqual({ spans: ['1234.5'], scales: [] });
    expect(normalizeAnswer('€ 1,234,567 million')).toEqual({ spans: ['1234567'], scales: ['million'] });
    expect(normalizeAnswer('12.5%')).toEqual({ spans: ['12.5'], scales: ['percent'] });
    expect(normalizeAnswer('2019, 2018')).toEqual({ spans: ['2019', '2018'], scales: [] });
    expect(normalizeAnswer('')).toEqual({ spans: [], scales: [] });
  });

  it.each([
    ['1,234.50', '1234.5', true],
    ['$1234.5.', '1234.50', true],
    ['The answer', 'the  answer.', true],
    ['12.5%', '12.5 percent', true],
    ['12.5', '12.5%', false], // the target's scale is missing
    ['12.5 million', '12.5 thousand', false],
    ['12.5 million', '12.5', true], // a scale on the prediction alone is not held against it
    ['0.125', '12.5%', false], // no unit conversion
    ['2018, 2019', '2019, 2018', true], // multi-span, any order
    ['2019', '2019, 2018', false],
    ['1,234', '1,2345', false],
    ['', '1234', false],
    ['', '', true],
    ['-3.0', '-3', true],
  ])('%j vs %j → %s', (prediction, target, expected) => {
    expect(exactMatch(prediction, target)).toBe(expected);
  });
});

describe('token F1', () => {
  it('counts the overlap of the normalised bags of tokens', () => {
    // prediction tokens [the, revenue, was, 1234.5], target [1234.5]: P 1/4, R 1, F1 2·(1/4)/(5/4) = 0.4
    expect(tokenF1('The revenue was 1,234.50', '1234.5')).toBeCloseTo(0.4, 12);
    expect(tokenF1('net income', 'net income')).toBe(1);
    // [a, a, b] vs [a, b, c]: overlap 2 (a once, b), P 2/3, R 2/3
    expect(tokenF1('a a b', 'a b c')).toBeCloseTo(2 / 3, 12);
    expect(tokenF1('x', 'y')).toBe(0);
  });

  it('handles empty outputs, multi-span answers and percent', () => {
    expect(tokenF1('', 'revenue')).toBe(0);
    expect(tokenF1('', '')).toBe(1);
    expect(tokenF1('...', '')).toBe(1); // nothing left after normalisation on either side
    expect(answerTokens('2019, 2018')).toEqual(['2019', '2018']);
    expect(tokenF1('2018, 2019', '2019, 2018')).toBe(1);
    // [2019] vs [2019, 2018]: P 1, R 1/2 → 2/3
    expect(tokenF1('2019', '2019, 2018')).toBeCloseTo(2 / 3, 12);
    expect(answerTokens('12.5%')).toEqual(['12.5', 'percent']);
    // [12.5] vs [12.5, percent]: P 1, R 1/2 → 2/3 (the scale costs part of the credit, not all)
    expect(tokenF1('12.5', '12.5%')).toBeCloseTo(2 / 3, 12);
    expect(answerTokens('"Revenue", (net)')).toEqual(['revenue', 'net']);
  });

  it('scores rows per metric', () => {
    expect(rowScores('accuracy', ['a', 'b ', 'c'], ['a', 'b', 'x'])).toEqual([1, 1, 0]);
    expect(rowScores('exact_match', ['1,000', 'x'], ['1000.0', 'y'])).toEqual([1, 0]);
    expect(() => rowScores('token_f1', ['a'], [])).toThrow(RangeError);
    expect(generationMetrics(['loss', 'token_f1', 'accuracy'])).toEqual(['accuracy', 'token_f1']);
    expect(generationMetrics(undefined)).toEqual([]);
  });
});

describe('bootstrapMean', () => {
  it('is the percentile bootstrap of the mean, seeded, flat for one cluster', () => {
    const values = [0, 0.5, 1, 1, 0.25, 0.75];
    const got = bootstrapMean(values, { seed: 7, label: 'x', resamples: 500 });
    // The same draws by hand: n scaled draws per resample from Rng.fromSeed(derivedSeed(seed, label)).
    const rng = Rng.fromSeed(derivedSeed(7, 'x'));
    const stats = Float64Array.from({ length: 500 }, () => {
      let s = 0;
      for (let i = 0; i < values.length; i += 1) s += values[rng.scaledInt(values.length)] as number;
      return s / values.length;
    }).sort();
    expect(got).toEqual({
      estimate: 3.5 / 6,
      lo: quantileSorted(stats, 0.025),
      hi: quantileSorted(stats, 0.975),
      n: 6,
      n_clusters: 1,
      resampling: 'flat',
    });
    expect(bootstrapMean(values, { seed: 7, label: 'x', resamples: 500 })).toEqual(got);
    expect(bootstrapMean(values, { seed: 8, label: 'x', resamples: 500 })).not.toEqual(got);
  });

  it('gives a point interval for a constant sample, none for an empty one, and resamples runs when several', () => {
    expect(bootstrapMean([0.5, 0.5, 0.5], { seed: 0, label: 'c' })).toMatchObject({ estimate: 0.5, lo: 0.5, hi: 0.5 });
    expect(bootstrapMean([], { seed: 0, label: 'c' })).toBeNull();
    // Two runs that disagree completely: the hierarchical interval spans both run means.
    const sample = clusteredSample([0, 0, 0, 0, 1, 1, 1, 1], ['a', 'a', 'a', 'a', 'b', 'b', 'b', 'b']);
    const h = bootstrapMean(sample, { seed: 1, label: 'h', resamples: 400 });
    expect(h).toMatchObject({ estimate: 0.5, lo: 0, hi: 1, n: 8, n_clusters: 2, resampling: 'hierarchical' });
  });
});

describe('utilityInterval', () => {
  const opts = { seed: 3, label: 'u', resamples: 400 };

  it('gives one run’s accuracy a Wilson interval (3 of 4: [0.3006, 0.9544])', () => {
    const u = utilityInterval('accuracy', [{ run_id: 'r1', scores: [1, 1, 0, 1] }], opts);
    expect(u).toMatchObject({ estimate: 0.75, n: 4, k: 3, n_runs: 1, method: 'wilson', resampling: null });
    expect(u?.lo).toBeCloseTo(0.3006, 4);
    expect(u?.hi).toBeCloseTo(0.9544, 4);
    expect(utilityInterval('exact_match', [{ run_id: 'r1', scores: [0, 0] }], opts)).toMatchObject({
      estimate: 0,
      lo: 0,
      k: 0,
    });
  });

  it('gives token F1 a bootstrap interval over rows, and pooled runs a hierarchical one', () => {
    const f1 = utilityInterval('token_f1', [{ run_id: 'r1', scores: [0.4, 1, 0] }], opts);
    expect(f1).toMatchObject({ n: 3, k: null, n_runs: 1, method: 'bootstrap', resampling: 'flat' });
    expect(f1?.estimate).toBeCloseTo(1.4 / 3, 12);
    const pooled = utilityInterval(
      'accuracy',
      [
        { run_id: 'r1', scores: [1, 1] },
        { run_id: 'r2', scores: [0, 1] },
        { run_id: 'r3', scores: [] },
      ],
      opts,
    );
    expect(pooled).toMatchObject({
      estimate: 0.75,
      n: 4,
      k: 3,
      n_runs: 2,
      method: 'bootstrap',
      resampling: 'hierarchical',
    });
    expect(utilityInterval('accuracy', [{ run_id: 'r1', scores: [] }], opts)).toBeNull();
  });
});

describe('grounding: point in box and parse rate', () => {
  const box = [10, 20, 50, 40] as const;

  it('reads the point of a click action, else the first bracketed pair', () => {
    expect(replyPoint('click(x=12, y=34)')).toEqual([12, 34]);
    expect(replyPoint('pyautogui.click(x=12.5,y=3)')).toEqual([12.5, 3]);
    expect(replyPoint('The button is at (30, 25).')).toEqual([30, 25]);
    expect(replyPoint('[30,25]')).toEqual([30, 25]);
    expect(replyPoint('click the Save button')).toBeNull();
    expect(replyPoint('type(text="AB12")')).toBeNull();
  });

  it('counts a point inside the box (edges included) as correct and an unparsable reply as wrong', () => {
    const replies = ['click(x=10, y=20)', 'click(x=50, y=40)', 'click(x=51, y=30)', '(30, 30)', 'no idea'];
    const targets = replies.map(() => 'click(x=30, y=30)');
    const boxes = replies.map(() => box);
    expect(rowScores('point_in_box', replies, targets, boxes)).toEqual([1, 1, 0, 1, 0]);
    expect(rowScores('parse_rate', replies, targets, boxes)).toEqual([1, 1, 1, 1, 0]);
    expect(() => rowScores('point_in_box', replies, targets)).toThrow(/needs the row's box/);
  });

  it('gives one run a Wilson interval for both', () => {
    const u = utilityInterval('point_in_box', [{ run_id: 'r1', scores: [1, 1, 0, 1, 0] }], { seed: 1, label: 'g' });
    expect(u).toMatchObject({ estimate: 0.6, k: 3, n: 5, method: 'wilson' });
  });
});
