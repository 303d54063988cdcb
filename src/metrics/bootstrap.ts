import { derivedSeed, Rng } from '../random.js';
import {
  TWO_RUNS_FLAG,
  intervalFlags,
  DEFAULT_CONFIDENCE,
  clusteredSample,
  sampleDesign,
  clusterCount,
  combineCrossed,
  medianDf,
  type Design,
  type ClusteredSample,
  type VarianceEstimate,
  type VarianceComponents,
} from './clustered-sample.js';
import { studentTQuantile } from './distributions.js';
import { boundTieShare, rankInterval } from './rank-interval.js';
import { median, quantileSorted, selectMedian } from './statistics.js';
export {
  TWO_RUNS_FLAG,
  intervalFlags,
  DEFAULT_CONFIDENCE,
  clusteredSample,
  sampleDesign,
  combineCrossed,
  type Design,
  type ClusteredSample,
  type VarianceEstimate,
  type VarianceComponents,
};

/**
 * Bootstrap confidence intervals for medians. Resampling is seeded: the same data, seed and label
 * always give the same interval, so a report can be regenerated and diffed.
 *
 * Observations that share a run share that run's training, so they are not independent draws;
 * the same canary in several runs shares its code and text, so its observations are not
 * independent either. A sample is given with its clusters (the run of each observation, or the
 * run pair of each paired difference) and its units (the canary); its design is read from them
 * (`sampleDesign`: crossed, nested or flat) and resampled accordingly (see `Design`). A sample
 * from a single cluster is resampled flat (canaries only, percentile interval), exactly as an
 * unclustered one.
 */
export interface BootstrapOptions {
  /** Report seed. */
  seed: number;
  /** Distinguishes independent intervals computed under one seed (e.g. a group key). */
  label: string;
  /** Bootstrap resamples. Default 2000. */
  resamples?: number;
  /** Two-sided confidence level. Default 0.95. */
  confidence?: number;
  /**
   * How each resample's median is found; all three give the same number. `count` (the default):
   * the sample is ranked once, a resample only counts how often it drew each rank, and the
   * median is read off the cumulative counts (no copy, no sort, no swaps); `select`: the resample
   * is copied and its median found by quickselect; `sort`: the reference, the copy is sorted.
   * `select` and `sort` are kept for the benchmark and the test that compares them.
   */
  median?: MedianMethod;
  /**
   * The values the estimated parameter can take (its parameter space, e.g. exposure in
   * [0, log2|C|], a difference of exposures in [−log2|C|, log2|C|]); a studentised interval is
   * kept inside them. Default: unbounded. Not the sample's range: with several runs the
   * population median can lie outside every observed value (all runs on one side of it).
   */
  bounds?: readonly [number, number];
  /**
   * A difference's two sides: the parameter space of each side's median (exposure: [0, log2|C|]),
   * where a side read on the ranks (`rankInterval`) ends when no observed value bounds it.
   * Default: unbounded.
   */
  sideBounds?: readonly [number, number];
}

export type MedianMethod = 'count' | 'select' | 'sort';

/** Utility means: `hierarchical`: clusters (runs), then observations within them; `flat`: observations only. */
export type Resampling = 'hierarchical' | 'flat';

/**
 * `percentile`: quantiles of the resampled medians; `studentized`: estimate ± t(df) · se; `rank`:
 * test inversion on the ranks (`rankInterval`), for a median that can land on a pile of values
 * tied at an end of the parameter space (exposure at its ceiling or floor); `bounds`: a
 * difference of two medians either of which is such a sample, [lo_a − hi_b, hi_a − lo_b] from
 * the two sides' own intervals (it covers whenever both sides do: at least 1 − 2α, and
 * 95–99.5% in the coverage bench, where MOVER's √(Δlo² + Δhi²) combination fell to 89%).
 */
export type IntervalMethod = 'percentile' | 'studentized' | 'rank' | 'bounds';

/**
 * A sample whose middle half reaches a pile at an end of its parameter space this large (or
 * larger; `boundTieShare`) is read on the ranks (`rankInterval`): its bootstrap variance
 * collapses on the tie.
 */
export const RANK_TIE_SHARE = 0.2;

function tiedAtBound(s: ClusteredSample, bounds: readonly [number, number] | undefined): boolean {
  return bounds !== undefined && boundTieShare(s.values, bounds) >= RANK_TIE_SHARE;
}

function flagged<T extends { flags?: string[] }>(interval: T, flags: string[]): T {
  return flags.length > 0 ? { ...interval, flags } : interval;
}

export interface MedianInterval {
  /** Median of the sample itself (not of the resamples). */
  estimate: number;
  lo: number;
  hi: number;
  n: number;
  /** Clusters (runs, or run pairs) the observations come from; 1 when unclustered. */
  n_clusters: number;
  resampling: Design;
  method: IntervalMethod;
  /** Standard error and degrees of freedom of a studentised interval; null for a percentile one. */
  se: number | null;
  df: number | null;
  /** The variance's components (one entry; studentised intervals only): what power planning scales. */
  components?: VarianceComponents[];
  /** Why the interval may be too narrow, in words the report prints beside it (see `intervalFlags`). */
  flags?: string[];
}

export interface DifferenceInterval {
  /** median(a) − median(b). */
  estimate: number;
  lo: number;
  hi: number;
  n_a: number;
  n_b: number;
  n_clusters_a: number;
  n_clusters_b: number;
  /** `crossed` when either side is crossed, else `nested` when either pools several runs, else `flat`. */
  resampling: Design;
  method: IntervalMethod;
  se: number | null;
  df: number | null;
  /** Each side's variance components (studentised intervals only; a flat side has none). */
  components?: VarianceComponents[];
  /** Why the interval may be too narrow (see `intervalFlags`). */
  flags?: string[];
}

export const DEFAULT_RESAMPLES = 2000;

function settings(options: BootstrapOptions): { resamples: number; alpha: number } {
  const resamples = options.resamples ?? DEFAULT_RESAMPLES;
  const confidence = options.confidence ?? DEFAULT_CONFIDENCE;
  if (!Number.isInteger(resamples) || resamples < 1)
    throw new RangeError(`resamples must be an integer >= 1, got ${resamples}`);
  if (!(confidence > 0 && confidence < 1)) throw new RangeError(`confidence must be in (0, 1), got ${confidence}`);
  return { resamples, alpha: 1 - confidence };
}

/** Largest resample a sample can produce: every draw the biggest cluster. */
function scratchSize(s: ClusteredSample): number {
  const k = clusterCount(s);
  if (k <= 1) return s.values.length;
  let max = 0;
  for (let c = 0; c < k; c += 1) max = Math.max(max, (s.offsets[c + 1] as number) - (s.offsets[c] as number));
  return max * k;
}

/**
 * Draws resamples of one sample and returns each one's median (the percentile intervals of
 * one-run samples; several runs go through `WeightedMedian`). The stream of draws is the same
 * for every method: flat for a single cluster (the draws an unclustered sample uses),
 * hierarchical otherwise (a cluster, then as many observations within it as it holds).
 */
class Resampler {
  private readonly k: number;
  private readonly scratch: Float64Array;
  /** `count`: rank of each observation in the sorted sample, the sorted values, draws per rank. */
  private readonly rankOf: Int32Array | null = null;
  private readonly sorted: Float64Array | null = null;
  private readonly counts: Int32Array | null = null;
  /** `count`: one block of drawn indices (as long as the largest cluster; one cluster: the sample). */
  private readonly drawn: Int32Array | null = null;

  constructor(
    private readonly s: ClusteredSample,
    private readonly method: MedianMethod = 'count',
  ) {
    this.k = clusterCount(s);
    const n = s.values.length;
    if (method === 'count') {
      const order = Array.from({ length: n }, (_, i) => i).sort(
        (a, b) => (s.values[a] as number) - (s.values[b] as number) || a - b,
      );
      this.rankOf = new Int32Array(n);
      this.sorted = new Float64Array(n);
      order.forEach((i, r) => {
        (this.rankOf as Int32Array)[i] = r;
        (this.sorted as Float64Array)[r] = s.values[i] as number;
      });
      this.counts = new Int32Array(n);
      let block = 0;
      for (let c = 0; c < this.k; c += 1)
        block = Math.max(block, (s.offsets[c + 1] as number) - (s.offsets[c] as number));
      this.drawn = new Int32Array(block);
      this.scratch = new Float64Array(0);
    } else {
      this.scratch = new Float64Array(scratchSize(s));
    }
  }

  median(rng: Rng): number {
    return this.method === 'count' ? this.countedMedian(rng) : this.copiedMedian(rng);
  }

  private copiedMedian(rng: Rng): number {
    const { values, offsets } = this.s;
    const scratch = this.scratch;
    const medianOf = this.method === 'select' ? selectMedian : sortedMedian;
    if (this.k <= 1) {
      const n = values.length;
      for (let i = 0; i < n; i += 1) scratch[i] = values[rng.scaledInt(n)] as number;
      return medianOf(scratch, n);
    }
    let m = 0;
    for (let c = 0; c < this.k; c += 1) {
      const drawn = rng.scaledInt(this.k);
      const start = offsets[drawn] as number;
      const size = (offsets[drawn + 1] as number) - start;
      for (let i = 0; i < size; i += 1) scratch[m++] = values[start + rng.scaledInt(size)] as number;
    }
    return medianOf(scratch, m);
  }

  private countedMedian(rng: Rng): number {
    const { offsets } = this.s;
    const rankOf = this.rankOf as Int32Array;
    const counts = this.counts as Int32Array;
    const sorted = this.sorted as Float64Array;
    const drawn = this.drawn as Int32Array;
    counts.fill(0);
    let m = 0;
    // Indices come in blocks (`scaledInts`: the same draws as one `scaledInt` call each, in order).
    if (this.k <= 1) {
      m = rankOf.length;
      rng.scaledInts(drawn, m, m);
      for (let i = 0; i < m; i += 1) {
        const r = rankOf[drawn[i] as number] as number;
        counts[r] = (counts[r] as number) + 1;
      }
    } else {
      for (let c = 0; c < this.k; c += 1) {
        const cluster = rng.scaledInt(this.k);
        const start = offsets[cluster] as number;
        const size = (offsets[cluster + 1] as number) - start;
        rng.scaledInts(drawn, size, size);
        for (let i = 0; i < size; i += 1) {
          const r = rankOf[start + (drawn[i] as number)] as number;
          counts[r] = (counts[r] as number) + 1;
        }
        m += size;
      }
    }
    return medianOfCounts(counts, sorted, m);
  }
}

/** Type-7 median of a multiset given as counts per rank of `sorted` (total weight m > 0): order
 * statistics k and k + 1 read off the cumulative counts. */
function medianOfCounts(counts: Int32Array | Float64Array, sorted: Float64Array, m: number): number {
  const h = (m - 1) * 0.5;
  const lo = Math.floor(h);
  let r = 0;
  let seen = counts[0] as number;
  while (seen <= lo) seen += counts[++r] as number;
  const lower = sorted[r] as number;
  if (lo + 1 >= m) return lower;
  while (seen <= lo + 1) seen += counts[++r] as number;
  return lower + (h - lo) * ((sorted[r] as number) - lower);
}

/** The reference: sort the first n values and interpolate (type 7). */
function sortedMedian(a: Float64Array, n: number): number {
  return quantileSorted(a.subarray(0, n).sort(), 0.5);
}

function asSample(values: ArrayLike<number> | ClusteredSample): ClusteredSample {
  return 'offsets' in values ? values : clusteredSample(values);
}

/**
 * Medians of weighted resamples: each observation enters a resample as many times as its run and
 * its canary (or its own draw) were drawn. The sample is ranked once; a resample adds its weights
 * per rank and reads the type-7 median off the cumulative counts.
 */
class WeightedMedian {
  readonly rankOf: Int32Array;
  readonly sorted: Float64Array;
  readonly counts: Float64Array;
  /** Cluster of each observation. */
  readonly clusterOf: Int32Array;

  constructor(readonly s: ClusteredSample) {
    const n = s.values.length;
    const order = Array.from({ length: n }, (_, i) => i).sort(
      (a, b) => (s.values[a] as number) - (s.values[b] as number) || a - b,
    );
    this.rankOf = new Int32Array(n);
    this.sorted = new Float64Array(n);
    order.forEach((i, r) => {
      this.rankOf[i] = r;
      this.sorted[r] = s.values[i] as number;
    });
    this.counts = new Float64Array(n);
    this.clusterOf = new Int32Array(n);
    for (let c = 0; c + 1 < s.offsets.length; c += 1)
      this.clusterOf.fill(c, s.offsets[c] as number, s.offsets[c + 1] as number);
  }

  /** Type-7 median of the multiset held in `counts` (total weight m > 0). */
  read(m: number): number {
    return medianOfCounts(this.counts, this.sorted, m);
  }

  /** Runs weighted by `runW`, canaries by `unitW` (either may be null: weight 1). */
  twoWay(runW: Int32Array | null, unitW: Int32Array | null): number {
    const { rankOf, counts, clusterOf } = this;
    const units = this.s.units as Int32Array;
    counts.fill(0);
    let m = 0;
    for (let i = 0; i < rankOf.length; i += 1) {
      const w =
        (runW ? (runW[clusterOf[i] as number] as number) : 1) * (unitW ? (unitW[units[i] as number] as number) : 1);
      if (w === 0) continue;
      const r = rankOf[i] as number;
      counts[r] = (counts[r] as number) + w;
      m += w;
    }
    return this.read(m);
  }

  /** Runs drawn with replacement (`drawRuns`) or kept (`false`), then observations within each run. */
  twoStage(rng: Rng, drawRuns: boolean): number {
    const { rankOf, counts } = this;
    const offsets = this.s.offsets;
    const k = offsets.length - 1;
    counts.fill(0);
    let m = 0;
    for (let c = 0; c < k; c += 1) {
      const drawn = drawRuns ? rng.scaledInt(k) : c;
      const start = offsets[drawn] as number;
      const size = (offsets[drawn + 1] as number) - start;
      for (let i = 0; i < size; i += 1) {
        const r = rankOf[start + rng.scaledInt(size)] as number;
        counts[r] = (counts[r] as number) + 1;
      }
      m += size;
    }
    return this.read(m);
  }
}

function variance(xs: Float64Array): number {
  const n = xs.length;
  if (n < 2) return 0;
  let mean = 0;
  for (let i = 0; i < n; i += 1) mean += xs[i] as number;
  mean /= n;
  let ss = 0;
  for (let i = 0; i < n; i += 1) ss += ((xs[i] as number) - mean) ** 2;
  return ss / (n - 1);
}

/**
 * Crossed design (R runs × C canaries). Three bootstrap variances of the median: runs resampled
 * with the canaries fixed (V_R), canaries resampled with the runs fixed (V_C), both at once
 * (V_RC, the two-way "pigeonhole" bootstrap). For a mean these are exactly Σα²/R², Σβ²/C² and
 * Σα²/R² + Σβ²/C² + Σε²/(RC)² (α, β, ε the run, canary and residual effects of the two-way
 * ANOVA), so the two-way bootstrap alone counts the residual once too often at each level
 * (Owen 2007, "The pigeonhole bootstrap") and the one-way ones lose (R−1)/R. The unbiased
 * estimate (MS_R + MS_C − MS_E)/(RC) of the variance of the mean is the combination
 *   V = R/(R−1)·V_R + C/(C−1)·V_C − RC/((R−1)(C−1))·(V_RC − V_R − V_C),
 * which is applied to the medians' bootstrap variances (the variance-component correction of
 * generalizability theory's bootstrap, Brennan 2001). V is floored at the larger of its first two
 * terms (the true variance exceeds each); its degrees of freedom are Satterthwaite's, at most
 * 2(R − 1) (`medianDf`).
 */
function crossedVariance(s: ClusteredSample, rng: Rng, resamples: number): VarianceEstimate {
  const k = clusterCount(s);
  const c = s.nUnits as number;
  const wm = new WeightedMedian(s);
  const b = Math.max(2, Math.floor(resamples / 3));
  const runW = new Int32Array(k);
  const unitW = new Int32Array(c);
  const vr = new Float64Array(b);
  const vc = new Float64Array(b);
  const vrc = new Float64Array(b);
  for (let i = 0; i < b; i += 1) {
    vr[i] = wm.twoWay(multinomial(rng, runW), null);
    vc[i] = wm.twoWay(null, multinomial(rng, unitW));
    vrc[i] = wm.twoWay(multinomial(rng, runW), multinomial(rng, unitW));
  }
  const v = combineCrossed(variance(vr), variance(vc), variance(vrc), k, c);
  return { ...v, df: medianDf(v.df, k) };
}

/**
 * Nested design (each run its own canaries). Two bootstrap variances of the median: runs drawn
 * with replacement, then canaries within each drawn run (V_2, the two-stage bootstrap), and
 * canaries within each run with the runs kept (V_W). For a mean, V_2 − V_W is exactly
 * (R−1)/R · s²/R (s² the variance of the run means), so V = R/(R−1)·(V_2 − V_W) is the unbiased
 * s²/R (the two-stage bootstrap alone adds the within-run variance a second time: Davison &
 * Hinkley 1997, §3.8). Floored at the within-run part n/(n−R)·V_W; R − 1 degrees of freedom
 * (the floor: n − R, at most 2(R − 1), `medianDf`).
 */
function nestedVariance(s: ClusteredSample, rng: Rng, resamples: number): VarianceEstimate {
  const k = clusterCount(s);
  const n = s.values.length;
  const wm = new WeightedMedian(s);
  const b = Math.max(2, Math.floor(resamples / 2));
  const v2 = new Float64Array(b);
  const vw = new Float64Array(b);
  for (let i = 0; i < b; i += 1) {
    v2[i] = wm.twoStage(rng, true);
    vw[i] = wm.twoStage(rng, false);
  }
  const V2 = variance(v2);
  const VW = variance(vw);
  const between = (k / (k - 1)) * (V2 - VW);
  const within = n > k ? (n / (n - k)) * VW : VW;
  const components: VarianceComponents = {
    design: 'nested',
    run: Math.max(0, between - within),
    canary: 0,
    residual: within,
    runs: k,
    canaries: n / k,
  };
  return between >= within
    ? { variance: between, df: k - 1, design: 'nested', components }
    : { variance: within, df: medianDf(Math.max(1, n - k), k), design: 'nested', components };
}

/** Multinomial counts of `into.length` draws among `into.length` items. */
function multinomial(rng: Rng, into: Int32Array): Int32Array {
  into.fill(0);
  const n = into.length;
  for (let i = 0; i < n; i += 1) {
    const j = rng.scaledInt(n);
    into[j] = (into[j] as number) + 1;
  }
  return into;
}

/** The percentile bootstrap's resampled medians of a one-run sample, sorted. */
function flatStats(s: ClusteredSample, rng: Rng, resamples: number, method: MedianMethod | undefined): Float64Array {
  const resampler = new Resampler(s, method);
  const stats = new Float64Array(resamples);
  for (let b = 0; b < resamples; b += 1) stats[b] = resampler.median(rng);
  return stats.sort();
}

/** The sampling variance of a sample's median under its design (flat: n/(n−1) × the bootstrap variance). */
export function medianVariance(
  s: ClusteredSample,
  rng: Rng,
  resamples: number,
  method?: MedianMethod,
): VarianceEstimate {
  const design = sampleDesign(s);
  if (design === 'crossed') return crossedVariance(s, rng, resamples);
  if (design === 'nested') return nestedVariance(s, rng, resamples);
  const n = s.values.length;
  const v = variance(flatStats(s, rng, resamples, method));
  return { variance: n > 1 ? (n / (n - 1)) * v : v, df: Math.max(1, n - 1), design: 'flat' };
}

/**
 * estimate ± t(df) · se, kept inside `bounds` (the parameter space; unbounded by default). Clipping
 * to the parameter space cannot lose coverage; clipping to the sample's range can: with R runs the
 * population median lies outside the range of the sample whenever every run sits on one side of
 * it by more than its canaries spread (11 crossed 3-run audits in 1,000 in the run-dominated
 * simulation of docs/metrics.md).
 */
export function studentizedInterval(
  estimate: number,
  v: Pick<VarianceEstimate, 'variance' | 'df'>,
  alpha: number,
  bounds: readonly [number, number] = [-Infinity, Infinity],
): { lo: number; hi: number; se: number; df: number } {
  const se = Math.sqrt(Math.max(0, v.variance));
  const q = studentTQuantile(1 - alpha / 2, v.df);
  return { lo: Math.max(bounds[0], estimate - q * se), hi: Math.min(bounds[1], estimate + q * se), se, df: v.df };
}

/**
 * Median with a bootstrap interval; null for an empty sample. A sample whose middle half reaches
 * a pile of values tied at an end of `options.bounds` (`RANK_TIE_SHARE`): the interval on the
 * ranks (`rankInterval`, method `rank`), whatever the design. One run (`flat`): the percentile
 * interval over canaries. Several runs: the design is read from the units (`sampleDesign`) and
 * the interval is estimate ± t(df) · se with the design's corrected bootstrap variance
 * (`crossedVariance`, `nestedVariance`), kept inside `options.bounds`; its coverage is measured in
 * `bench/coverage.ts`.
 */
export function bootstrapMedian(
  sample: ArrayLike<number> | ClusteredSample,
  options: BootstrapOptions,
): MedianInterval | null {
  const s = asSample(sample);
  const n = s.values.length;
  if (n === 0) return null;
  const { resamples, alpha } = settings(options);
  const estimate = median(s.values);
  const rng = Rng.fromSeed(derivedSeed(options.seed, options.label));
  const k = clusterCount(s);
  if (tiedAtBound(s, options.bounds)) {
    const i: MedianInterval = {
      estimate,
      ...rankInterval(s, alpha, options.bounds as readonly [number, number]),
      n,
      n_clusters: k,
      resampling: sampleDesign(s),
      method: 'rank',
      se: null,
      df: null,
    };
    return flagged(i, intervalFlags(k));
  }
  if (k <= 1) {
    const stats = flatStats(s, rng, resamples, options.median);
    return {
      estimate,
      lo: quantileSorted(stats, alpha / 2),
      hi: quantileSorted(stats, 1 - alpha / 2),
      n,
      n_clusters: k,
      resampling: 'flat',
      method: 'percentile',
      se: null,
      df: null,
    };
  }
  const v = medianVariance(s, rng, resamples, options.median);
  const i: MedianInterval = {
    estimate,
    ...studentizedInterval(estimate, v, alpha, options.bounds),
    n,
    n_clusters: k,
    resampling: v.design,
    method: 'studentized',
    ...(v.components ? { components: [v.components] } : {}),
  };
  return flagged(i, intervalFlags(k));
}

/**
 * median(a) − median(b) for two independent samples (focal canaries against a control arm);
 * null when either is empty. Either side piled at an end of `sideBounds` (exposure at its
 * ceiling or floor): the difference of the sides' own intervals (method `bounds`). Both from
 * one run: the percentile interval of the differences of resampled medians. Otherwise each
 * side's variance under its own design, summed, with Welch–Satterthwaite degrees of freedom.
 */
export function bootstrapMedianDifference(
  a: ArrayLike<number> | ClusteredSample,
  b: ArrayLike<number> | ClusteredSample,
  options: BootstrapOptions,
): DifferenceInterval | null {
  const sa = asSample(a);
  const sb = asSample(b);
  if (sa.values.length === 0 || sb.values.length === 0) return null;
  const { resamples, alpha } = settings(options);
  const estimate = median(sa.values) - median(sb.values);
  const rng = Rng.fromSeed(derivedSeed(options.seed, options.label));
  const ka = clusterCount(sa);
  const kb = clusterCount(sb);
  const counts = { n_a: sa.values.length, n_b: sb.values.length, n_clusters_a: ka, n_clusters_b: kb };
  if (tiedAtBound(sa, options.sideBounds) || tiedAtBound(sb, options.sideBounds)) {
    // Either side on a pile of ties: each side's own interval (ranks where tied), the difference of their bounds.
    const side = { ...options, bounds: options.sideBounds };
    const ia = bootstrapMedian(sa, { ...side, label: `${options.label}|a` }) as MedianInterval;
    const ib = bootstrapMedian(sb, { ...side, label: `${options.label}|b` }) as MedianInterval;
    const [min, max] = options.bounds ?? [-Infinity, Infinity];
    const resampling: Design =
      ka <= 1 && kb <= 1
        ? 'flat'
        : sampleDesign(sa) === 'crossed' || sampleDesign(sb) === 'crossed'
          ? 'crossed'
          : 'nested';
    const d: DifferenceInterval = {
      estimate,
      lo: Math.max(min, ia.lo - ib.hi),
      hi: Math.min(max, ia.hi - ib.lo),
      ...counts,
      resampling,
      method: 'bounds',
      se: null,
      df: null,
    };
    return flagged(d, intervalFlags(ka, kb));
  }
  if (ka <= 1 && kb <= 1) {
    const resampleA = new Resampler(sa, options.median);
    const resampleB = new Resampler(sb, options.median);
    const stats = new Float64Array(resamples);
    for (let i = 0; i < resamples; i += 1) stats[i] = resampleA.median(rng) - resampleB.median(rng);
    stats.sort();
    return {
      estimate,
      lo: quantileSorted(stats, alpha / 2),
      hi: quantileSorted(stats, 1 - alpha / 2),
      ...counts,
      resampling: 'flat',
      method: 'percentile',
      se: null,
      df: null,
    };
  }
  const va = medianVariance(sa, rng, resamples, options.median);
  const vb = medianVariance(sb, rng, resamples, options.median);
  const total = va.variance + vb.variance;
  const denominator = (va.variance * va.variance) / va.df + (vb.variance * vb.variance) / vb.df;
  const df = denominator > 0 ? (total * total) / denominator : Math.min(va.df, vb.df);
  const design: Design = va.design === 'crossed' || vb.design === 'crossed' ? 'crossed' : 'nested';
  const components = [va.components, vb.components].filter((c): c is VarianceComponents => c !== undefined);
  return flagged(
    {
      estimate,
      ...studentizedInterval(estimate, { variance: total, df }, alpha, options.bounds),
      ...counts,
      resampling: design,
      method: 'studentized',
      ...(components.length > 0 ? { components } : {}),
    } as DifferenceInterval,
    intervalFlags(ka, kb),
  );
}
