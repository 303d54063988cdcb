import { Rng } from '../random.js';
import { combineCrossed, type Design, type VarianceComponents, type VarianceEstimate } from './clustered-sample.js';
import { studentizedInterval } from './bootstrap.js';
import { membershipAuc } from './privacy.js';
import { normalQuantile } from './wilson.js';

/**
 * The membership AUC of a cell (several runs, the same canaries in each) with an interval over
 * both sources of variation: which canaries were drawn and which fine-tuning runs were drawn.
 *
 * Estimate: the mean over runs of each run's Mann–Whitney AUC (ties count ½), i.e. the share of
 * (member, non-member) pairs of the same run that the member wins. Pairs are never formed across
 * runs: a run's shift of every exposure would otherwise count as membership signal.
 *
 * Interval, by design (as the exposure medians', `src/metrics/bootstrap.ts`):
 * - `crossed` (every run holds the same canaries with the same roles): three bootstrap variances
 *   of the weighted AUC, runs resampled with canaries fixed (V_R), canaries resampled with runs
 *   fixed (V_C; members among members, non-members among non-members, so both groups keep their
 *   sizes), both at once (V_RC), combined by `combineCrossed` (the two-way variance-component
 *   correction; Owen 2007, Brennan 2001) into estimate ± t(df)·se, clipped to [0, 1];
 * - `nested` (runs hold different canaries or roles): the per-run AUCs' own spread, s²/R with R − 1
 *   degrees of freedom, floored at the mean DeLong variance over R (the canary part alone);
 * - `flat` (one run): DeLong's interval (`membershipAuc`), canary sampling only: a rerun can fall
 *   outside it.
 * Its coverage is measured by `bench/auc-coverage.ts` (docs/metrics.md, Privacy readouts).
 */

export interface AucCanary {
  /** The canary's identity across runs (id + code). */
  key: string;
  score: number;
  member: boolean;
}

export interface AucRun {
  run_id: string;
  canaries: readonly AucCanary[];
}

export interface CrossedAuc {
  estimate: number;
  lo: number;
  hi: number;
  confidence: number;
  /** How the runs and canaries were resampled (see the module comment). */
  design: Design;
  /** `studentized` (crossed, nested) or `delong` (one run). */
  method: 'studentized' | 'delong';
  runs: number;
  /** Canaries per run (crossed: the same in every run). */
  n_in: number;
  n_out: number;
  se: number | null;
  df: number | null;
  /** Run, canary and residual variance parts (crossed only). */
  components: VarianceComponents | null;
}

export interface CrossedAucOptions {
  confidence?: number;
  /** Bootstrap resamples, split over the three variances (default 2000). */
  resamples?: number;
  seed?: number;
}

/** One run laid out for the weighted sweep: canaries by ascending score, tie blocks marked. */
interface SweepRun {
  /** Canary index (into the cell's sorted canary list) at each position, ascending score. */
  order: Int32Array;
  /** 1 where a position starts a new tie block. */
  blockStart: Uint8Array;
}

function sweepRun(scores: Float64Array): SweepRun {
  const order = Int32Array.from(scores.keys()).sort((a, b) => (scores[a] as number) - (scores[b] as number));
  const blockStart = new Uint8Array(order.length);
  for (let i = 0; i < order.length; i += 1)
    blockStart[i] = i === 0 || scores[order[i] as number] !== scores[order[i - 1] as number] ? 1 : 0;
  return { order, blockStart };
}

/**
 * Σ_i Σ_j u_i u_j credit(i, j) over members i and non-members j of one run, credit 1 for a member
 * above, ½ for a tie, in one ascending sweep over tie blocks.
 */
function weightedWins(run: SweepRun, member: Uint8Array, u: Float64Array): number {
  const { order, blockStart } = run;
  let below = 0;
  let wins = 0;
  let i = 0;
  while (i < order.length) {
    let j = i;
    let blockOut = 0;
    let blockIn = 0;
    do {
      const k = order[j] as number;
      if (member[k] === 1) blockIn += u[k] as number;
      else blockOut += u[k] as number;
      j += 1;
    } while (j < order.length && blockStart[j] === 0);
    wins += blockIn * (below + 0.5 * blockOut);
    below += blockOut;
    i = j;
  }
  return wins;
}

function variance(xs: Float64Array): number {
  const n = xs.length;
  if (n < 2) return 0;
  let mean = 0;
  for (const x of xs) mean += x;
  mean /= n;
  let ss = 0;
  for (const x of xs) ss += (x - mean) ** 2;
  return ss / (n - 1);
}

/** Multinomial counts: `into.length` draws among the indices in `pool`, added at those indices. */
function drawInto(rng: Rng, pool: Int32Array, into: Float64Array): void {
  for (const k of pool) into[k] = 0;
  for (let i = 0; i < pool.length; i += 1) {
    const k = pool[rng.scaledInt(pool.length)] as number;
    into[k] = (into[k] as number) + 1;
  }
}

/** The cell's AUC with its interval; null without a run holding both members and non-members. */
export function crossedAuc(runs: readonly AucRun[], options: CrossedAucOptions = {}): CrossedAuc | null {
  const confidence = options.confidence ?? 0.95;
  const alpha = 1 - confidence;
  // Runs in id order, so the bootstrap draws do not depend on the input's order.
  const usable = runs
    .filter((r) => r.canaries.some((c) => c.member) && r.canaries.some((c) => !c.member))
    .sort((a, b) => (a.run_id < b.run_id ? -1 : a.run_id > b.run_id ? 1 : 0));
  if (usable.length === 0) return null;
  if (usable.length === 1) {
    const only = usable[0] as AucRun;
    const d = membershipAuc(only.canaries, confidence) as NonNullable<ReturnType<typeof membershipAuc>>;
    const nIn = only.canaries.filter((c) => c.member).length;
    return {
      ...d,
      confidence,
      design: 'flat',
      method: 'delong',
      runs: 1,
      n_in: nIn,
      n_out: only.canaries.length - nIn,
      se: null,
      df: null,
      components: null,
    };
  }
  // Canaries in key order, so the bootstrap draws do not depend on the input's order.
  const roles = new Map<string, boolean>();
  let crossed = true;
  for (const r of usable) {
    if (r.canaries.length !== new Set(r.canaries.map((c) => c.key)).size) crossed = false;
    for (const c of r.canaries) {
      const seen = roles.get(c.key);
      if (seen === undefined) roles.set(c.key, c.member);
      else if (seen !== c.member) crossed = false;
    }
  }
  const keys = [...roles.keys()].sort();
  if (crossed && usable.some((r) => r.canaries.length !== keys.length)) crossed = false;
  const perRun = usable.map(
    (r) => membershipAuc(r.canaries, confidence) as NonNullable<ReturnType<typeof membershipAuc>>,
  );
  const estimate = perRun.reduce((a, x) => a + x.estimate, 0) / usable.length;
  const k = usable.length;
  const rng = new Rng('crossed-auc', options.seed ?? 0);
  const resamples = options.resamples ?? 2000;
  if (!crossed) {
    const nIn = Math.min(...usable.map((r) => r.canaries.filter((c) => c.member).length));
    const nOut = Math.min(...usable.map((r) => r.canaries.filter((c) => !c.member).length));
    const aucs = Float64Array.from(perRun, (x) => x.estimate);
    const between = variance(aucs) / k;
    // DeLong's variance of each run's AUC, from its interval's wider half (the interval is clipped to [0, 1]).
    const z = normalZ(confidence);
    const within = perRun.reduce((a, x) => a + (Math.max(x.hi - x.estimate, x.estimate - x.lo) / z) ** 2, 0) / (k * k);
    const v: VarianceEstimate = { variance: Math.max(between, within), df: k - 1, design: 'nested' };
    const i = studentizedInterval(estimate, v, alpha, [0, 1]);
    return {
      estimate,
      lo: i.lo,
      hi: i.hi,
      confidence,
      design: 'nested',
      method: 'studentized',
      runs: k,
      n_in: nIn,
      n_out: nOut,
      se: i.se,
      df: i.df,
      components: null,
    };
  }
  const index = new Map(keys.map((key, i) => [key, i]));
  const c = keys.length;
  const member = Uint8Array.from(keys, (key) => (roles.get(key) ? 1 : 0));
  const ins = Int32Array.from(keys.keys()).filter((i) => member[i] === 1);
  const outs = Int32Array.from(keys.keys()).filter((i) => member[i] === 0);
  const sweeps = usable.map((r) => {
    const scores = new Float64Array(c);
    for (const x of r.canaries) scores[index.get(x.key) as number] = x.score;
    return sweepRun(scores);
  });
  const ones = new Float64Array(c).fill(1);
  const wins = sweeps.map((s) => weightedWins(s, member, ones));
  const weighted = (w: Float64Array | null, u: Float64Array | null): number => {
    let num = 0;
    let den = 0;
    let uIn = ins.length;
    let uOut = outs.length;
    if (u) {
      uIn = 0;
      uOut = 0;
      for (const i of ins) uIn += u[i] as number;
      for (const i of outs) uOut += u[i] as number;
    }
    for (let r = 0; r < k; r += 1) {
      const wr = w ? (w[r] as number) : 1;
      if (wr === 0) continue;
      num += wr * (u ? weightedWins(sweeps[r] as SweepRun, member, u) : (wins[r] as number));
      den += wr;
    }
    return num / (den * uIn * uOut);
  };
  const b = Math.max(2, Math.floor(resamples / 3));
  const runW = new Float64Array(k);
  const unitW = new Float64Array(c);
  const allRuns = Int32Array.from({ length: k }, (_, i) => i);
  const vr = new Float64Array(b);
  const vc = new Float64Array(b);
  const vrc = new Float64Array(b);
  for (let i = 0; i < b; i += 1) {
    drawInto(rng, allRuns, runW);
    vr[i] = weighted(runW, null);
    drawInto(rng, ins, unitW);
    drawInto(rng, outs, unitW);
    vc[i] = weighted(null, unitW);
    drawInto(rng, allRuns, runW);
    drawInto(rng, ins, unitW);
    drawInto(rng, outs, unitW);
    vrc[i] = weighted(runW, unitW);
  }
  const v = combineCrossed(variance(vr), variance(vc), variance(vrc), k, c);
  const i = studentizedInterval(estimate, v, alpha, [0, 1]);
  return {
    estimate,
    lo: i.lo,
    hi: i.hi,
    confidence,
    design: 'crossed',
    method: 'studentized',
    runs: k,
    n_in: ins.length,
    n_out: outs.length,
    se: i.se,
    df: i.df,
    components: v.components ?? null,
  };
}

function normalZ(confidence: number): number {
  // Two-sided normal quantile, as `membershipAuc` used for its interval.
  return normalQuantile(1 - (1 - confidence) / 2);
}
