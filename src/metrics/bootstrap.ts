import { derivedSeed, Rng } from '../random.js';
import { median, quantileSorted, selectMedian } from './statistics.js';

/**
 * Percentile-bootstrap confidence intervals for medians. Resampling is seeded: the same data, seed
 * and label always give the same interval, so a report can be regenerated and diffed.
 *
 * Observations that share a run share that run's training, so they are not independent draws.
 * When a sample is given with its clusters (the run of each observation, or the run pair of each
 * paired difference) and holds more than one, each resample is hierarchical: draw the clusters
 * with replacement, then the observations within each drawn cluster with replacement. A sample
 * from a single cluster is resampled flat (canaries only), exactly as an unclustered one.
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
}

export type MedianMethod = 'count' | 'select' | 'sort';

/** `hierarchical`: clusters (runs, run pairs), then observations within them; `flat`: observations only. */
export type Resampling = 'hierarchical' | 'flat';

export interface MedianInterval {
  /** Median of the sample itself (not of the resamples). */
  estimate: number;
  lo: number;
  hi: number;
  n: number;
  /** Clusters (runs, or run pairs) the observations come from; 1 when unclustered. */
  n_clusters: number;
  resampling: Resampling;
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
  /** `hierarchical` when either side pooled more than one cluster (each side resampled on its own). */
  resampling: Resampling;
}

export const DEFAULT_RESAMPLES = 2000;
export const DEFAULT_CONFIDENCE = 0.95;

function settings(options: BootstrapOptions): { resamples: number; alpha: number } {
  const resamples = options.resamples ?? DEFAULT_RESAMPLES;
  const confidence = options.confidence ?? DEFAULT_CONFIDENCE;
  if (!Number.isInteger(resamples) || resamples < 1) throw new RangeError(`resamples must be an integer >= 1, got ${resamples}`);
  if (!(confidence > 0 && confidence < 1)) throw new RangeError(`confidence must be in (0, 1), got ${confidence}`);
  return { resamples, alpha: 1 - confidence };
}

/**
 * A sample laid out by cluster: `values[offsets[c] .. offsets[c + 1])` are cluster c's
 * observations, clusters in order of first appearance.
 */
export interface ClusteredSample {
  values: Float64Array;
  offsets: Int32Array;
}

/** Group `values` by `clusters` (one key per value; omitted: one cluster). */
export function clusteredSample(values: ArrayLike<number>, clusters?: ArrayLike<string>): ClusteredSample {
  const n = values.length;
  if (!clusters) return { values: Float64Array.from(values), offsets: Int32Array.of(0, n) };
  if (clusters.length !== n) throw new RangeError(`clusteredSample: ${n} values but ${clusters.length} cluster keys`);
  const byCluster = new Map<string, number[]>();
  for (let i = 0; i < n; i += 1) {
    const key = clusters[i] as string;
    const list = byCluster.get(key);
    if (list) list.push(values[i] as number);
    else byCluster.set(key, [values[i] as number]);
  }
  const out = new Float64Array(n);
  const offsets = new Int32Array(byCluster.size + 1);
  let at = 0;
  let c = 0;
  for (const list of byCluster.values()) {
    offsets[c] = at;
    for (const v of list) out[at++] = v;
    c += 1;
  }
  offsets[c] = at;
  return { values: out, offsets };
}

function clusterCount(s: ClusteredSample): number {
  return s.offsets.length - 1;
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
 * Draws resamples of one sample and returns each one's median. The stream of draws is the same
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
      const order = Array.from({ length: n }, (_, i) => i).sort((a, b) => (s.values[a] as number) - (s.values[b] as number) || a - b);
      this.rankOf = new Int32Array(n);
      this.sorted = new Float64Array(n);
      order.forEach((i, r) => {
        (this.rankOf as Int32Array)[i] = r;
        (this.sorted as Float64Array)[r] = s.values[i] as number;
      });
      this.counts = new Int32Array(n);
      let block = 0;
      for (let c = 0; c < this.k; c += 1) block = Math.max(block, (s.offsets[c + 1] as number) - (s.offsets[c] as number));
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
    // Order statistics k and k + 1 (type 7 median) from the cumulative counts.
    const h = (m - 1) * 0.5;
    const lo = Math.floor(h);
    let r = 0;
    let seen = counts[0] as number;
    while (seen <= lo) seen += counts[++r] as number;
    const lower = sorted[r] as number;
    if (lo + 1 >= m) return lower;
    while (seen <= lo + 1) seen += counts[++r] as number;
    const upper = sorted[r] as number;
    return lower + (h - lo) * (upper - lower);
  }
}

/** The reference: sort the first n values and interpolate (type 7). */
function sortedMedian(a: Float64Array, n: number): number {
  return quantileSorted(a.subarray(0, n).sort(), 0.5);
}

function asSample(values: ArrayLike<number> | ClusteredSample): ClusteredSample {
  return 'offsets' in values ? values : clusteredSample(values);
}

/** Median with a percentile-bootstrap interval; null for an empty sample. */
export function bootstrapMedian(sample: ArrayLike<number> | ClusteredSample, options: BootstrapOptions): MedianInterval | null {
  const s = asSample(sample);
  const n = s.values.length;
  if (n === 0) return null;
  const { resamples, alpha } = settings(options);
  const estimate = median(s.values);
  const rng = Rng.fromSeed(derivedSeed(options.seed, options.label));
  const resampler = new Resampler(s, options.median);
  const stats = new Float64Array(resamples);
  for (let b = 0; b < resamples; b += 1) stats[b] = resampler.median(rng);
  stats.sort();
  const k = clusterCount(s);
  return { estimate, lo: quantileSorted(stats, alpha / 2), hi: quantileSorted(stats, 1 - alpha / 2), n, n_clusters: k, resampling: k > 1 ? 'hierarchical' : 'flat' };
}

/**
 * median(a) − median(b) for two independent samples (focal canaries against a control arm), each
 * resampled on its own (hierarchically when it pools several clusters); null when either is empty.
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
  const resampleA = new Resampler(sa, options.median);
  const resampleB = new Resampler(sb, options.median);
  const stats = new Float64Array(resamples);
  for (let i = 0; i < resamples; i += 1) stats[i] = resampleA.median(rng) - resampleB.median(rng);
  stats.sort();
  const ka = clusterCount(sa);
  const kb = clusterCount(sb);
  return {
    estimate,
    lo: quantileSorted(stats, alpha / 2),
    hi: quantileSorted(stats, 1 - alpha / 2),
    n_a: sa.values.length,
    n_b: sb.values.length,
    n_clusters_a: ka,
    n_clusters_b: kb,
    resampling: ka > 1 || kb > 1 ? 'hierarchical' : 'flat',
  };
}
