import { derivedSeed, Rng } from '../random.js';
import type { UtilityMetric } from '../contracts/manifest.js';
import {
  clusteredSample,
  DEFAULT_CONFIDENCE,
  DEFAULT_RESAMPLES,
  type BootstrapOptions,
  type ClusteredSample,
  type Resampling,
} from './bootstrap.js';
import { quantileSorted } from './statistics.js';
import { wilsonInterval } from './wilson.js';

/**
 * Task utility beyond loss: scores of the trainer's greedy replies to the utility rows
 * (utility/base.jsonl, utility/final.jsonl) against the rows' targets, and their intervals.
 *
 * - `accuracy`: the reply, trimmed, equals the target, trimmed (a class label: Banking77's intent).
 * - `exact_match`: TAT-QA-style normalised match, strict on the scale (`normalizeAnswer`).
 * - `token_f1`: SQuAD-style bag-of-tokens F1 of the normalised texts (`answerTokens`).
 * - `point_in_box`: the point the reply names (`replyPoint`) lies inside the row's box, edges
 *   included; a reply no point can be read from counts as wrong.
 * - `parse_rate`: a point can be read from the reply at all.
 *
 * A run's accuracy and exact match are proportions of rows with Wilson intervals; token F1 is a
 * mean over rows with a percentile-bootstrap interval (seeded). A figure that pools several runs is
 * a mean over all their rows, resampled hierarchically (runs, then rows within each drawn run).
 */
export type GenerationMetric = Exclude<UtilityMetric, 'loss'>;
export const GENERATION_METRICS: readonly GenerationMetric[] = [
  'accuracy',
  'exact_match',
  'token_f1',
  'point_in_box',
  'parse_rate',
];

/** Metrics scored against the row's box (grounding rows), not its target text. */
export const BOX_METRICS: readonly GenerationMetric[] = ['point_in_box', 'parse_rate'];

export function isGenerationMetric(m: string): m is GenerationMetric {
  return (GENERATION_METRICS as readonly string[]).includes(m);
}

/** Generation metrics a manifest's `utility.metrics` asks for, in GENERATION_METRICS order (absent: none). */
export function generationMetrics(metrics: readonly string[] | undefined): GenerationMetric[] {
  const asked = new Set(metrics ?? []);
  return GENERATION_METRICS.filter((m) => asked.has(m));
}

// ---- accuracy -------------------------------------------------------------------------------

/** Strict match of a class label: equal after trimming whitespace, case and punctuation kept. */
export function accuracyMatch(prediction: string, target: string): boolean {
  return prediction.trim() === target.trim();
}

// ---- TAT-QA-style normalisation ---------------------------------------------------------------

export const SCALE_WORDS: readonly string[] = ['thousand', 'million', 'billion', 'percent'];
const CURRENCY = /[$€£¥₹]/gu;
/** A comma between digits that is followed by exactly three digits: a thousands separator. */
const THOUSANDS = /(\d),(?=\d{3}(?!\d))/gu;
const NUMBER = /^[-+]?(?:\d+(?:\.\d*)?|\.\d+)$/u;

/** A normalised answer: its spans (comma-separated parts, numbers canonical) and its scale words. */
export interface NormalizedAnswer {
  spans: string[];
  /** Scale words present (`%` counts as `percent`), sorted, each once. */
  scales: string[];
}

/** `1,234.50` → `1234.5`, `007` → `7`, `-0.00001` → `0`: numbers rounded to 4 decimals. */
export function canonicalNumber(token: string): string | null {
  if (!NUMBER.test(token)) return null;
  const value = Number(Number(token).toFixed(4));
  return String(Object.is(value, -0) ? 0 : value);
}

/**
 * Lowercase, currency signs removed, thousands separators removed, `%` read as the word
 * `percent`, whitespace collapsed and trimmed, trailing periods dropped; then split into spans at
 * commas (a multi-span answer is written `a, b`), each span's numbers canonical
 * (`canonicalNumber`) and its scale words taken out into `scales`.
 */
export function normalizeAnswer(text: string): NormalizedAnswer {
  let s = text.toLowerCase().replace(CURRENCY, '').replace(THOUSANDS, '$1').replace(/%/gu, ' percent ');
  s = s
    .replace(/\s+/gu, ' ')
    .trim()
    .replace(/[\s.]+$/u, '');
  const scales = new Set<string>();
  const spans: string[] = [];
  for (const part of s.split(',')) {
    const words: string[] = [];
    for (const word of part.trim().split(' ')) {
      if (word === '') continue;
      if (SCALE_WORDS.includes(word)) scales.add(word);
      else words.push(canonicalNumber(word) ?? word);
    }
    if (words.length > 0) spans.push(words.join(' '));
  }
  return { spans, scales: [...scales].sort() };
}

function sameMultiset(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false;
  const x = [...a].sort();
  const y = [...b].sort();
  return x.every((v, i) => v === y[i]);
}

/**
 * TAT-QA-style exact match: the normalised spans agree as a multiset (multi-span answers in any
 * order), and when the target carries a scale word the prediction carries exactly the same ones
 * (strict answer-and-scale; a scale on the prediction alone is not held against it).
 */
export function exactMatch(prediction: string, target: string): boolean {
  const p = normalizeAnswer(prediction);
  const t = normalizeAnswer(target);
  if (t.scales.length > 0 && !sameMultiset(p.scales, t.scales)) return false;
  return sameMultiset(p.spans, t.spans);
}

// ---- token F1 -------------------------------------------------------------------------------

/** Tokens of the normalised text: every span's words (punctuation stripped from their ends, numbers canonical) and the scale words. */
export function answerTokens(text: string): string[] {
  const { spans, scales } = normalizeAnswer(text);
  const tokens: string[] = [];
  for (const span of spans) {
    for (const word of span.split(' ')) {
      const token = canonicalNumber(word) ?? word.replace(/^\p{P}+|\p{P}+$/gu, '');
      if (token !== '') tokens.push(token);
    }
  }
  return [...tokens, ...scales];
}

/**
 * SQuAD-style F1 of the two bags of tokens: overlap counted with multiplicity, precision = overlap
 * / predicted tokens, recall = overlap / target tokens. Both empty: 1; one empty: 0.
 */
export function tokenF1(prediction: string, target: string): number {
  const p = answerTokens(prediction);
  const t = answerTokens(target);
  if (p.length === 0 || t.length === 0) return p.length === t.length ? 1 : 0;
  const counts = new Map<string, number>();
  for (const tok of t) counts.set(tok, (counts.get(tok) ?? 0) + 1);
  let overlap = 0;
  for (const tok of p) {
    const left = counts.get(tok) ?? 0;
    if (left > 0) {
      overlap += 1;
      counts.set(tok, left - 1);
    }
  }
  if (overlap === 0) return 0;
  const precision = overlap / p.length;
  const recall = overlap / t.length;
  return (2 * precision * recall) / (precision + recall);
}

// ---- grounding ------------------------------------------------------------------------------

export type Box = readonly [number, number, number, number];

const NUMBER_TEXT = String.raw`[-+]?(?:\d+(?:\.\d*)?|\.\d+)`;
/** `x=12, y=34` (any separators between), the click action's form. */
const NAMED_POINT = new RegExp(String.raw`\bx\s*[=:]\s*(${NUMBER_TEXT})[\s,;]*y\s*[=:]\s*(${NUMBER_TEXT})`, 'u');
/** `(12, 34)` or `[12, 34]`: the first bracketed pair of numbers. */
const PAIR_POINT = new RegExp(String.raw`[([]\s*(${NUMBER_TEXT})\s*,\s*(${NUMBER_TEXT})\s*[)\]]`, 'u');

/**
 * The point a grounding reply names, in image pixels: `click(x=12, y=34)` (the task's own action),
 * else the first bracketed pair `(12, 34)` / `[12, 34]`; null when neither is there.
 */
export function replyPoint(reply: string): [number, number] | null {
  const m = NAMED_POINT.exec(reply) ?? PAIR_POINT.exec(reply);
  if (!m) return null;
  const x = Number(m[1]);
  const y = Number(m[2]);
  return Number.isFinite(x) && Number.isFinite(y) ? [x, y] : null;
}

export function pointInBox(reply: string, box: Box): boolean {
  const p = replyPoint(reply);
  return p !== null && p[0] >= box[0] && p[0] <= box[2] && p[1] >= box[1] && p[1] <= box[3];
}

/** One row's score: 1 or 0 for accuracy, exact match and the grounding metrics, F1 in [0, 1] for token_f1. */
export function rowScore(metric: GenerationMetric, prediction: string, target: string, box?: Box | null): number {
  if (metric === 'point_in_box' || metric === 'parse_rate') {
    if (!box) throw new RangeError(`${metric} needs the row's box`);
    return (metric === 'parse_rate' ? replyPoint(prediction) !== null : pointInBox(prediction, box)) ? 1 : 0;
  }
  if (metric === 'accuracy') return accuracyMatch(prediction, target) ? 1 : 0;
  if (metric === 'exact_match') return exactMatch(prediction, target) ? 1 : 0;
  return tokenF1(prediction, target);
}

export function rowScores(
  metric: GenerationMetric,
  predictions: readonly string[],
  targets: readonly string[],
  boxes?: readonly (Box | null)[],
): number[] {
  if (predictions.length !== targets.length)
    throw new RangeError(`rowScores: ${predictions.length} predictions but ${targets.length} targets`);
  return predictions.map((p, i) => rowScore(metric, p, targets[i] as string, boxes?.[i] ?? null));
}

// ---- intervals ------------------------------------------------------------------------------

/** A mean with its percentile-bootstrap interval (`estimate` is the sample's own mean). */
export interface MeanInterval {
  estimate: number;
  lo: number;
  hi: number;
  n: number;
  n_clusters: number;
  resampling: Resampling;
}

/**
 * Mean with a percentile-bootstrap interval, seeded like the median intervals (`Rng.fromSeed` of
 * the report seed and the interval's label): flat over the values for one cluster, hierarchical
 * (clusters, then values within each drawn cluster) for several. null for an empty sample.
 */
export function bootstrapMean(
  sample: ArrayLike<number> | ClusteredSample,
  options: BootstrapOptions,
): MeanInterval | null {
  const s = 'offsets' in sample ? sample : clusteredSample(sample);
  const { values, offsets } = s;
  const n = values.length;
  if (n === 0) return null;
  const resamples = options.resamples ?? DEFAULT_RESAMPLES;
  const confidence = options.confidence ?? DEFAULT_CONFIDENCE;
  if (!Number.isInteger(resamples) || resamples < 1)
    throw new RangeError(`resamples must be an integer >= 1, got ${resamples}`);
  if (!(confidence > 0 && confidence < 1)) throw new RangeError(`confidence must be in (0, 1), got ${confidence}`);
  const alpha = 1 - confidence;
  const k = offsets.length - 1;
  let total = 0;
  for (let i = 0; i < n; i += 1) total += values[i] as number;
  const rng = Rng.fromSeed(derivedSeed(options.seed, options.label));
  const stats = new Float64Array(resamples);
  for (let b = 0; b < resamples; b += 1) {
    let sum = 0;
    let m = 0;
    if (k <= 1) {
      for (let i = 0; i < n; i += 1) sum += values[rng.scaledInt(n)] as number;
      m = n;
    } else {
      for (let c = 0; c < k; c += 1) {
        const drawn = rng.scaledInt(k);
        const start = offsets[drawn] as number;
        const size = (offsets[drawn + 1] as number) - start;
        for (let i = 0; i < size; i += 1) sum += values[start + rng.scaledInt(size)] as number;
        m += size;
      }
    }
    stats[b] = sum / m;
  }
  stats.sort();
  return {
    estimate: total / n,
    lo: quantileSorted(stats, alpha / 2),
    hi: quantileSorted(stats, 1 - alpha / 2),
    n,
    n_clusters: k,
    resampling: k > 1 ? 'hierarchical' : 'flat',
  };
}

/** A utility metric over the rows of one run or of several runs pooled, with its interval. */
export interface UtilityInterval {
  /** Share of rows matched (accuracy, exact match) or mean F1 (token_f1). */
  estimate: number;
  lo: number;
  hi: number;
  /** Rows scored (pooled over runs). */
  n: number;
  /** Rows matched (accuracy, exact match); null for token F1. */
  k: number | null;
  n_runs: number;
  /** `wilson`: a proportion from one run; `bootstrap`: a mean (token F1, or any metric pooling runs). */
  method: 'wilson' | 'bootstrap';
  /** Bootstrap only: `flat` (rows of one run), `hierarchical` (runs, then rows). */
  resampling: Resampling | null;
}

export interface RunScores {
  run_id: string;
  /** Per-row scores (`rowScores`). */
  scores: readonly number[];
}

/**
 * The interval of one metric over one run's rows (Wilson for a proportion, the flat bootstrap of
 * the mean for token F1) or several runs' rows pooled (the hierarchical bootstrap of the mean, for
 * every metric: the rows of one run share its training). null when no row was scored.
 */
export function utilityInterval(
  metric: GenerationMetric,
  runs: readonly RunScores[],
  options: BootstrapOptions,
): UtilityInterval | null {
  const present = runs.filter((r) => r.scores.length > 0);
  const values = present.flatMap((r) => [...r.scores]);
  if (values.length === 0) return null;
  const binary = metric !== 'token_f1';
  const k = binary ? values.reduce((a, v) => a + v, 0) : null;
  if (binary && present.length === 1) {
    const p = wilsonInterval(k as number, values.length, options.confidence ?? DEFAULT_CONFIDENCE);
    if (p)
      return { estimate: p.rate, lo: p.lo, hi: p.hi, n: p.n, k: p.k, n_runs: 1, method: 'wilson', resampling: null };
  }
  const clusters = present.flatMap((r) => r.scores.map(() => r.run_id));
  const mean = bootstrapMean(clusteredSample(values, clusters), options) as MeanInterval;
  return {
    estimate: mean.estimate,
    lo: mean.lo,
    hi: mean.hi,
    n: mean.n,
    k,
    n_runs: present.length,
    method: 'bootstrap',
    resampling: mean.resampling,
  };
}
