import type { DifferenceInterval, MedianInterval } from '../metrics/bootstrap.js';
import type { ArmSummary } from '../metrics/arm.js';
import type { Proportion } from '../metrics/wilson.js';
import type { DesignProportion } from '../metrics/design-proportion.js';

/**
 * How numbers read in the Markdown and HTML tables: exposures to two decimals (the reference
 * study's precision), every estimate with its interval and its n. CSV and JSON keep full
 * precision.
 */
export const DASH = '—';

export function num(x: number | null | undefined, digits = 2): string {
  if (x === null || x === undefined) return DASH;
  if (!Number.isFinite(x)) return String(x);
  const fixed = x.toFixed(digits);
  // Avoid a lone "-0.00".
  return /^-0\.?0*$/.test(fixed) ? fixed.slice(1) : fixed;
}

export function signed(x: number, digits = 2): string {
  const s = num(x, digits);
  return x > 0 && s !== num(0, digits) ? `+${s}` : s;
}

export function medianCi(m: MedianInterval | null): string {
  return m ? `${num(m.estimate)} [${num(m.lo)}, ${num(m.hi)}]${intervalFlagText(m)}` : DASH;
}

export function differenceCi(d: DifferenceInterval | MedianInterval | null): string {
  return d ? `${signed(d.estimate)} [${signed(d.lo)}, ${signed(d.hi)}]${intervalFlagText(d)}` : DASH;
}

/** ` (⚠ 2 runs per arm: interval may be too narrow)` after an interval the coverage bench found too narrow; empty otherwise. */
export function intervalFlagText(i: { flags?: readonly string[] }): string {
  return i.flags && i.flags.length > 0 ? ` (⚠ ${i.flags.join('; ')})` : '';
}

/** Beside every interval that rests on one run per arm. */
export const ONE_RUN = 'one run: a rerun can fall outside this interval';

/** `7.70, 9.12, 11.63`: an arm's per-run medians (the run-to-run spread); a dash for a single run. */
export function runMedianList(a: { run_medians: { median: number }[] } | null): string {
  if (!a || a.run_medians.length < 2) return DASH;
  return a.run_medians.map((r) => num(r.median)).join(', ');
}

/**
 * Which resampling an interval used, in words: runs then canaries (run pairs then canary pairs
 * for a paired difference) when it pools several, canary sampling only when a single run (per
 * arm) stands behind it.
 */
export function resampling(
  i:
    | (Pick<MedianInterval, 'resampling'> & { method?: string })
    | (Pick<DifferenceInterval, 'resampling'> & { method?: string })
    | null,
  what: 'arm' | 'difference' | 'paired',
): string {
  if (!i) return DASH;
  const ranks =
    i.method === 'rank'
      ? '; on the ranks (values tied at the ceiling or floor)'
      : i.method === 'bounds'
        ? '; from the two sides’ intervals (values tied at the ceiling or floor)'
        : '';
  if (i.resampling === 'crossed')
    return (what === 'paired' ? 'crossed: run pairs × canaries, two-way' : 'crossed: runs × canaries, two-way') + ranks;
  if (i.resampling === 'nested')
    return (what === 'paired' ? 'nested: run pairs → canary pairs' : 'nested: runs → canaries') + ranks;
  if (what === 'paired') return `single run pair: canary pairs only${ranks}; ${ONE_RUN}`;
  return what === 'difference'
    ? `single run per arm: canaries only${ranks}; ${ONE_RUN}`
    : `single run: canaries only${ranks}; ${ONE_RUN}`;
}

/** A difference with its interval and the resampling behind it. */
export function differenceCell(
  d: DifferenceInterval | MedianInterval | null,
  what: 'difference' | 'paired' = 'difference',
): string {
  return d ? `${differenceCi(d)} (${resampling(d, what)})` : DASH;
}

export function proportion(p: (Proportion & { flags?: readonly string[] }) | null): string {
  return p ? `${p.k}/${p.n} (${num(p.rate)}) [${num(p.lo)}, ${num(p.hi)}]${intervalFlagText(p)}` : DASH;
}

/**
 * Which interval a pooled copy rate carries, in words: Wilson over one run's canaries, or Wilson at
 * the design's effective number of trials with a t quantile when it pools several runs.
 */
export function copyInterval(p: DesignProportion | null): string {
  if (!p) return DASH;
  if (p.method === 'wilson') return 'Wilson, one run';
  if (p.method === 'runs-exact') return `exact, each of ${p.n_runs} runs one trial`;
  return `design-Wilson, ${p.resampling} runs × canaries: n_eff ${num(p.n_eff, 1)}, t(${num(p.df, 1)})`;
}

/** `16/48 (0.33) [0.01, 0.96] (design-Wilson, crossed runs × canaries: n_eff 2.0, t(2.0))` */
export function copyRate(p: DesignProportion | null): string {
  return p ? `${proportion(p)} (${copyInterval(p)})` : DASH;
}

/** `16/16, 0/16, 0/16`: a pooled rate's count in each run (the run-to-run spread); a dash for a single run. */
export function runCountList(p: DesignProportion | null): string {
  if (!p || p.runs.length < 2) return DASH;
  return p.runs.map((r) => `${r.k}/${r.n}`).join(', ');
}

/** `8 canaries · 2 runs` */
export function counts(a: Pick<ArmSummary, 'n_canaries' | 'n_runs'>): string {
  return `${a.n_canaries} canar${a.n_canaries === 1 ? 'y' : 'ies'} · ${a.n_runs} run${a.n_runs === 1 ? '' : 's'}`;
}

/** `8 canaries · 2 runs; runs → canaries`: the n and the resampling of an arm's interval. */
export function countsAndResampling(a: ArmSummary): string {
  return `${counts(a)}; ${resampling(a.exposure, 'arm')}`;
}

/** An arm in one cell: `0.52 [0.10, 1.20] (8 canaries · 2 runs; runs → canaries)`. */
export function armCell(a: ArmSummary | null): string {
  return a ? `${medianCi(a.exposure)} (${countsAndResampling(a)})` : DASH;
}

export function short(hex: string | null | undefined, n = 10): string {
  return hex ? hex.slice(0, n) : DASH;
}
