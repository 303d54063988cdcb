import {
  clusteredSample,
  combineCrossed,
  DEFAULT_CONFIDENCE,
  intervalFlags,
  medianDf,
  sampleDesign,
  type ClusteredSample,
  type Design,
  type VarianceEstimate,
} from './clustered-sample.js';
import { studentTQuantile } from './distributions.js';
import { wilsonBounds, wilsonInterval, type Proportion } from './wilson.js';

/**
 * A proportion pooled over the runs of a cell (the copy rate of substituted probes: k of n
 * canary × run observations copied the shown code), with an interval that respects how the
 * observations cluster. Canaries of one run share its training, and copying is close to
 * all-or-nothing per run (a seed's base either copies a shown code or it does not), so counting
 * n = canaries × runs as independent trials (Wilson over n) gives an interval far too narrow.
 *
 * - one run: the Wilson interval over its n canaries (`method: wilson`, `resampling: flat`);
 * - several runs: the variance of the pooled rate under the design read from the observations
 *   (`sampleDesign`, as the exposure medians): `crossed` (the same canaries in every run) the
 *   two-way variance components (MS_R + MS_C − MS_E)/(RC), combined and floored exactly as
 *   `combineCrossed` does for the medians' bootstrap variances (for a mean those variances have
 *   closed forms, so nothing is resampled); `nested` (each run its own canaries) the between-run
 *   (cluster-robust) variance R/(R−1)·Σ(k_r − p·n_r)²/N², floored at the within-run binomial part.
 *   The interval is Wilson's at the effective number of trials n_eff = p(1−p)/V (at most n: never
 *   narrower than Wilson over n), with the normal quantile replaced by t(df) (Korn & Graubard 1998,
 *   for proportions from clustered samples), so it stays inside [0, 1] and does not collapse at 0
 *   or 1 (`method: design-wilson`).
 * - several runs that all agree at 0 or all at 1 (k = 0 or k = n): the data cannot say how
 *   clustered copying is, and every run copying all or none of its canaries is what it looks like,
 *   so each run is one trial (n_eff = R) and the bound is the exact one for 0 of R trials,
 *   [0, 1 − (α/2)^(1/R)] (Clopper–Pearson; `method: runs-exact`): 0 of 48 over 3 runs gives
 *   [0, 0.71]. An earlier version put Wilson at n = R with a t(R − 1) quantile, [0, 0.86]: t
 *   widens for a variance estimated from the data, and here none is estimated. Setting n_eff = n
 *   instead (Korn & Graubard's convention for p̂ = 0) gives [0, 0.28] but covers 63% where runs
 *   copy all or nothing at a rate of 0.3 (every run at 0 in 34% of 3-run audits).
 */
export interface RunCount {
  run_id: string;
  k: number;
  n: number;
}

export type ProportionMethod = 'wilson' | 'design-wilson' | 'runs-exact';

export interface DesignProportion extends Proportion {
  /**
   * `wilson`: one run, its canaries as independent trials; `design-wilson`: several runs, Wilson at
   * the design's effective n with t(df); `runs-exact`: several runs all at 0 (or all at 1), each
   * run one trial, the exact (Clopper–Pearson) bound.
   */
  method: ProportionMethod;
  /** How the observations were read: `flat` (one run), `crossed` or `nested` (see `Design`). */
  resampling: Design;
  n_runs: number;
  /** Effective number of independent trials behind the interval (n for one run). */
  n_eff: number;
  /** Degrees of freedom of the t quantile; null for one run (Wilson's normal quantile) and for `runs-exact`. */
  df: number | null;
  /** Per run: k of its n measured observations, runs in order of first appearance. */
  runs: RunCount[];
  /** Why the interval may be too narrow (`intervalFlags`: 2 runs); absent when nothing is known to be wrong. */
  flags?: string[];
}

/** Per-run counts of measured (non-null) indicators, runs in order of first appearance. */
function runCounts(values: readonly (boolean | null)[], runIds: readonly string[]): RunCount[] {
  const byRun = new Map<string, RunCount>();
  values.forEach((v, i) => {
    if (v === null) return;
    const id = runIds[i] as string;
    let c = byRun.get(id);
    if (!c) byRun.set(id, (c = { run_id: id, k: 0, n: 0 }));
    c.n += 1;
    if (v) c.k += 1;
  });
  return [...byRun.values()];
}

/**
 * Crossed R × C table of 0/1 values: the variance of its grand mean from the exact
 * (closed-form) bootstrap variances V_R = Σα²/R², V_C = Σβ²/C², V_RC = V_R + V_C + Σε²/(RC)²,
 * combined as the medians' are (`combineCrossed`). Several values of one run and canary are
 * averaged into one cell.
 */
function crossedMeanVariance(s: ClusteredSample): VarianceEstimate {
  const r = s.offsets.length - 1;
  const c = s.nUnits as number;
  const units = s.units as Int32Array;
  const sum = new Float64Array(r * c);
  const count = new Float64Array(r * c);
  for (let run = 0; run < r; run += 1) {
    for (let i = s.offsets[run] as number; i < (s.offsets[run + 1] as number); i += 1) {
      const cell = run * c + (units[i] as number);
      sum[cell] = (sum[cell] as number) + (s.values[i] as number);
      count[cell] = (count[cell] as number) + 1;
    }
  }
  const y = sum.map((v, i) => v / (count[i] as number));
  const runMean = new Float64Array(r);
  const unitMean = new Float64Array(c);
  let grand = 0;
  for (let run = 0; run < r; run += 1) {
    for (let u = 0; u < c; u += 1) {
      const v = y[run * c + u] as number;
      runMean[run] = (runMean[run] as number) + v / c;
      unitMean[u] = (unitMean[u] as number) + v / r;
      grand += v / (r * c);
    }
  }
  let ssR = 0;
  let ssC = 0;
  let ssE = 0;
  for (let run = 0; run < r; run += 1) ssR += ((runMean[run] as number) - grand) ** 2;
  for (let u = 0; u < c; u += 1) ssC += ((unitMean[u] as number) - grand) ** 2;
  for (let run = 0; run < r; run += 1) {
    for (let u = 0; u < c; u += 1)
      ssE += ((y[run * c + u] as number) - (runMean[run] as number) - (unitMean[u] as number) + grand) ** 2;
  }
  const vR = ssR / (r * r);
  const vC = ssC / (c * c);
  return combineCrossed(vR, vC, vR + vC + ssE / (r * c) ** 2, r, c);
}

/** Nested: the between-run (cluster-robust) variance of the pooled rate, floored at its within-run part. */
function nestedMeanVariance(runs: readonly RunCount[], p: number): VarianceEstimate {
  const r = runs.length;
  const n = runs.reduce((a, x) => a + x.n, 0);
  let between = 0;
  let within = 0;
  for (const x of runs) {
    between += (x.k - p * x.n) ** 2;
    const pr = x.k / x.n;
    within += x.n * pr * (1 - pr);
  }
  between *= r / (r - 1) / (n * n);
  within = ((n > r ? n / (n - r) : 1) * within) / (n * n);
  // Floored at the within-run part, the df stay those of R runs (`medianDf`): when R runs happen to
  // agree, their between-run spread is still estimated from R of them (nested 3-run recovery
  // covered 91–93% with the floor's n − R).
  return between >= within
    ? { variance: between, df: r - 1, design: 'nested' }
    : { variance: within, df: medianDf(Math.max(1, n - r), r), design: 'nested' };
}

/**
 * The pooled proportion of true among the measured (non-null) `values`, `runIds[i]` and
 * `unitIds[i]` (the canary: id + code) naming each value's run and unit; null when nothing was
 * measured. See the module comment for the interval.
 */
export function designProportion(
  values: readonly (boolean | null)[],
  runIds: readonly string[],
  unitIds: readonly string[],
  confidence = DEFAULT_CONFIDENCE,
): DesignProportion | null {
  if (runIds.length !== values.length || unitIds.length !== values.length)
    throw new RangeError(
      `designProportion: ${values.length} values, ${runIds.length} run ids, ${unitIds.length} unit ids`,
    );
  const runs = runCounts(values, runIds);
  const k = runs.reduce((a, x) => a + x.k, 0);
  const n = runs.reduce((a, x) => a + x.n, 0);
  if (n === 0) return null;
  if (runs.length === 1) {
    const w = wilsonInterval(k, n, confidence) as Proportion;
    return { ...w, method: 'wilson', resampling: 'flat', n_runs: 1, n_eff: n, df: null, runs };
  }
  const measured = values.flatMap((v, i) => (v === null ? [] : [i]));
  const sample = clusteredSample(
    measured.map((i) => (values[i] ? 1 : 0)),
    measured.map((i) => runIds[i] as string),
    measured.map((i) => unitIds[i] as string),
  );
  const design = sampleDesign(sample) as Exclude<Design, 'flat'>;
  const p = k / n;
  const r = runs.length;
  const flags = intervalFlags(r);
  if (k === 0 || k === n) {
    // Every run at 0 (or at 1): each run is one trial, and R trials that all failed bound the rate
    // exactly (Clopper–Pearson): 1 − (α/2)^(1/R). No variance is estimated, so no t quantile.
    const edge = 1 - ((1 - confidence) / 2) ** (1 / r);
    return {
      k,
      n,
      rate: p,
      lo: k === 0 ? 0 : 1 - edge,
      hi: k === 0 ? edge : 1,
      method: 'runs-exact',
      resampling: design,
      n_runs: r,
      n_eff: r,
      df: null,
      runs,
      ...(flags.length > 0 ? { flags } : {}),
    };
  }
  const v = design === 'crossed' ? crossedMeanVariance(sample) : nestedMeanVariance(runs, p);
  const nEff = v.variance > 0 ? Math.min(n, (p * (1 - p)) / v.variance) : n;
  const df = v.df;
  const z = studentTQuantile(1 - (1 - confidence) / 2, df);
  const [lo, hi] = wilsonBounds(p, nEff, z);
  return {
    k,
    n,
    rate: p,
    lo,
    hi,
    method: 'design-wilson',
    resampling: design,
    n_runs: r,
    n_eff: nEff,
    df,
    runs,
    ...(flags.length > 0 ? { flags } : {}),
  };
}
