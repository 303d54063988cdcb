/**
 * The sample layout and the pieces of the interval machinery that every interval module shares:
 * clustered samples and their design, variance estimates with their components, the crossed
 * combination, and the flags an interval carries. Kept apart from `bootstrap.ts` so that the
 * rank and design-proportion intervals, which `bootstrap.ts` calls, can use them without an
 * import cycle.
 */

/**
 * How a median's sampling design was read and resampled:
 * - `crossed`: every run holds the same canaries (same ids and codes; seeds of one cell), so
 *   canaries and runs are two crossed random factors: runs and canaries are resampled
 *   independently (two-way), and the interval is studentised with a variance-component
 *   correction (see `crossedVariance`);
 * - `nested`: each run holds its own canaries: runs, then canaries within each drawn run, with the
 *   two-stage correction (see `nestedVariance`);
 * - `flat`: one run (or run pair): canaries only, percentile interval. It covers canary sampling,
 *   not run-to-run variation.
 */
export type Design = 'crossed' | 'nested' | 'flat';

/** Flag of an interval that rests on two runs (or run pairs): see `intervalFlags`. */
export const TWO_RUNS_FLAG = '2 runs per arm: interval may be too narrow';

/**
 * Where the report's intervals were measured to cover less than 95% whatever the method
 * (docs/metrics.md, coverage), the words the report prints beside the figure: two runs (or run
 * pairs) behind it, whose run-to-run variance rests on one degree of freedom (92.4–92.6% in the
 * run-dominated ceiling median and the copy rate of `bench/coverage.ts`, 88–93% in more rows before
 * the df cap; with 3 runs every row reaches 93%). Empty when nothing is known to be wrong.
 */
export function intervalFlags(...clusters: number[]): string[] {
  return clusters.includes(2) ? [TWO_RUNS_FLAG] : [];
}

export const DEFAULT_CONFIDENCE = 0.95;

/**
 * The most degrees of freedom a median's studentised interval takes from R runs (or run pairs):
 * 2(R − 1). Satterthwaite's ν treats each mean square as a scaled χ², true for normal effects and
 * a mean; a median's bootstrap variance is far noisier than that, and a skewed run distribution
 * makes the run term's estimate noisier still, so ν overstates how well R runs pin the variance
 * down. Uncapped, 3-run intervals covered 90.8–93.3% in the skewed, mid-range and unbounded rows of
 * `bench/coverage.ts` and the p-values behind Holm's α/4 step ran at 2.6% where 1.25% is nominal
 * (docs/metrics.md, "Intervals" and "Verdicts and power").
 */
export function medianDf(df: number, runs: number): number {
  return Math.min(df, 2 * Math.max(1, runs - 1));
}

/**
 * A sample laid out by cluster: `values[offsets[c] .. offsets[c + 1])` are cluster c's
 * observations, clusters in order of first appearance. `units` (when given) names the unit of
 * each value — the canary (id + code) — as an index in [0, nUnits): the same canary in two runs
 * has the same unit, which is how a crossed design is told from a nested one.
 */
export interface ClusteredSample {
  values: Float64Array;
  offsets: Int32Array;
  units?: Int32Array;
  nUnits?: number;
}

/** Group `values` by `clusters` (one key per value; omitted: one cluster), keeping each value's unit. */
export function clusteredSample(
  values: ArrayLike<number>,
  clusters?: ArrayLike<string>,
  units?: ArrayLike<string>,
): ClusteredSample {
  const n = values.length;
  if (units && units.length !== n) throw new RangeError(`clusteredSample: ${n} values but ${units.length} unit keys`);
  const unitIndex = new Map<string, number>();
  const unitOf = (i: number): number => {
    const key = (units as ArrayLike<string>)[i] as string;
    let u = unitIndex.get(key);
    if (u === undefined) unitIndex.set(key, (u = unitIndex.size));
    return u;
  };
  if (!clusters) {
    const out: ClusteredSample = { values: Float64Array.from(values), offsets: Int32Array.of(0, n) };
    if (units) {
      out.units = Int32Array.from({ length: n }, (_, i) => unitOf(i));
      out.nUnits = unitIndex.size;
    }
    return out;
  }
  if (clusters.length !== n) throw new RangeError(`clusteredSample: ${n} values but ${clusters.length} cluster keys`);
  const byCluster = new Map<string, number[]>();
  for (let i = 0; i < n; i += 1) {
    const key = clusters[i] as string;
    const list = byCluster.get(key);
    if (list) list.push(i);
    else byCluster.set(key, [i]);
  }
  const out = new Float64Array(n);
  const unitOut = units ? new Int32Array(n) : null;
  const offsets = new Int32Array(byCluster.size + 1);
  let at = 0;
  let c = 0;
  for (const list of byCluster.values()) {
    offsets[c] = at;
    for (const i of list) {
      if (unitOut) unitOut[at] = unitOf(i);
      out[at++] = values[i] as number;
    }
    c += 1;
  }
  offsets[c] = at;
  const sample: ClusteredSample = { values: out, offsets };
  if (unitOut) {
    sample.units = unitOut;
    sample.nUnits = unitIndex.size;
  }
  return sample;
}

/**
 * The design of a sample: `flat` for one cluster; `crossed` when there are several clusters, the
 * units are known, and every cluster holds every unit (the same canaries in every run); `nested`
 * otherwise (each run its own canaries, or canary sets that only partly overlap).
 */
export function sampleDesign(s: ClusteredSample): Design {
  const k = clusterCount(s);
  if (k <= 1) return 'flat';
  const { units, nUnits } = s;
  if (!units || nUnits === undefined || nUnits < 2) return 'nested';
  const seen = new Uint8Array(nUnits);
  for (let c = 0; c < k; c += 1) {
    seen.fill(0);
    let distinct = 0;
    for (let i = s.offsets[c] as number; i < (s.offsets[c + 1] as number); i += 1) {
      const u = units[i] as number;
      if (seen[u] === 0) {
        seen[u] = 1;
        distinct += 1;
      }
    }
    if (distinct !== nUnits) return 'nested';
  }
  return 'crossed';
}

export function clusterCount(s: ClusteredSample): number {
  return s.offsets.length - 1;
}

/** A median's sampling variance with its (Satterthwaite) degrees of freedom. */
export interface VarianceEstimate {
  variance: number;
  df: number;
  design: Design;
  /** Its split into run, canary and residual parts (crossed and nested designs). */
  components?: VarianceComponents;
}

/**
 * A median's sampling variance split by source, each part at the sample's own size (they sum to
 * the variance before flooring): `run` shrinks as 1/runs, `canary` as 1/canaries, `residual` (the
 * run × canary part; nested: the within-run part) as 1/(runs × canaries). From the two-way mean
 * squares of the crossed combination (run = (MS_R − MS_E)/(RC), canary = (MS_C − MS_E)/(RC),
 * residual = MS_E/(RC)); nested: the between-run part less the within-run one, and the within-run
 * part. Negative estimates are set to 0. Power planning (`src/metrics/verdict.ts`) scales them.
 */
export interface VarianceComponents {
  design: 'crossed' | 'nested';
  run: number;
  canary: number;
  residual: number;
  /** Runs (run pairs) and canaries per run they were measured at. */
  runs: number;
  canaries: number;
}

/** The crossed variance-component combination of the three bootstrap variances (see `crossedVariance`). */
export function combineCrossed(VR: number, VC: number, VRC: number, k: number, c: number): VarianceEstimate {
  const tR = (k / (k - 1)) * VR;
  const tC = (c / (c - 1)) * VC;
  const tE = Math.max(0, ((k * c) / ((k - 1) * (c - 1))) * (VRC - VR - VC));
  const v = tR + tC - tE;
  const components: VarianceComponents = {
    design: 'crossed',
    run: Math.max(0, tR - tE),
    canary: Math.max(0, tC - tE),
    residual: tE,
    runs: k,
    canaries: c,
  };
  if (v <= Math.max(tR, tC))
    return tR >= tC
      ? { variance: tR, df: k - 1, design: 'crossed', components }
      : { variance: tC, df: c - 1, design: 'crossed', components };
  const df = (v * v) / ((tR * tR) / (k - 1) + (tC * tC) / (c - 1) + (tE * tE) / ((k - 1) * (c - 1)));
  return { variance: v, df, design: 'crossed', components };
}
