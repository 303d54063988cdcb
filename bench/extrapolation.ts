/**
 * Validates extrapolated exposure (src/metrics/exposure-extrapolation.ts) on an exhaustive space:
 * for every probe of every finished run of an audit, it samples `--decoys` decoys from the probe's
 * exhaustive score file (the true code left out), extrapolates the true code's exposure from them,
 * and compares with the exact exposure from its rank among all |C| candidates. Printed: median and
 * IQR of (extrapolated − exact), with its extremes, and of (sampled-rank − exact) by exact-exposure
 * band, and how often the fit was flagged or withheld; with --tail, how far the fitted upper tail
 * lies from the exhaustive one. Tiny and hf audits read the same way.
 *
 *   npx tsx bench/extrapolation.ts artifacts/audits/audit-a35aae3dbbda   # configs/quickstart.yaml (tiny)
 *   npx tsx bench/extrapolation.ts artifacts/audits/audit-3f5288c07081   # configs/extrapolation-hf-cpu.yaml
 *   npx tsx bench/extrapolation.ts <audit-dir> --decoys 1000 --seed 1 --phase final
 */
import { exposureCeiling } from '../src/metrics/exposure.js';
import {
  extrapolatedExposure,
  fitSkewNormal,
  skewNormalCdf,
  skewNormalLogSf,
  type ExtrapolationStatus,
  type SkewNormal,
} from '../src/metrics/exposure-extrapolation.js';
import { Rng } from '../src/random.js';
import { loadAudit } from '../src/report/load-audit.js';
import { observeRun } from '../src/report/observe.js';
import { readScoreFile } from '../src/report/scores.js';

const HELP = `usage: npx tsx bench/extrapolation.ts <audit-dir> [--decoys N] [--seed S] [--phase NAME] [--runs K] [--timing] [--tail]

Extrapolated exposure from N sampled decoys per probe against the exact exposure of the audit's
exhaustive candidate space (a 4-digit audit: 10,000 candidates).

  --decoys N   decoys sampled per probe, without replacement, the true code left out (default 1000)
  --seed S     sampling seed (default 1)
  --phase NAME only evaluations of this phase (e.g. final; default: every phase)
  --runs K     only the first K finished runs (default: all)
  --timing     also time, side by side on every probe, the reference path (exact log Φ in the
               likelihood search, one tail integral per decoy in the KS distance) and print the
               ratio of the two and the largest difference of their extrapolated exposures
  --tail       also compare the fitted upper tail with the exhaustive one: log2 of the fitted
               P(decoy ≥ x) over the exhaustive share, at the 100th, 10th and 1st highest of the
               |C| − 1 other codes, beside the fit's own diagnostic on the sampled decoys
  --help       this text`;

/** Ranks (1 = highest) among the |C| − 1 other codes at which --tail reads the fitted tail. */
const TAIL_RANKS = [100, 10, 1];

interface Row {
  exact: number;
  fitted: number | null;
  reported: number | null;
  sampledRank: number;
  status: ExtrapolationStatus;
  /** The fit's diagnostic on the sampled decoys (bits). */
  tailError: number | null;
  /** --tail: fitted − exhaustive log2 P(decoy ≥ x) at each of TAIL_RANKS (bits). */
  spaceTail: number[] | null;
}

function parseArgs(argv: string[]): {
  audit: string;
  decoys: number;
  seed: number;
  phase: string | null;
  runs: number;
  timing: boolean;
  tail: boolean;
} {
  if (argv.includes('--help') || argv.includes('-h') || argv.length === 0) {
    console.log(HELP);
    process.exit(argv.length === 0 ? 2 : 0);
  }
  const out = {
    audit: '',
    decoys: 1000,
    seed: 1,
    phase: null as string | null,
    runs: Infinity,
    timing: false,
    tail: false,
  };
  for (let i = 0; i < argv.length; i += 1) {
    const a = argv[i] as string;
    const value = (): string => {
      const v = argv[i + 1];
      if (v === undefined) throw new Error(`${a} needs a value (see --help)`);
      i += 1;
      return v;
    };
    const int = (name: string, v: string): number => {
      const n = Number(v);
      if (!Number.isInteger(n) || n < 1)
        throw new Error(`${name} must be a positive integer, got ${JSON.stringify(v)}`);
      return n;
    };
    if (a === '--decoys') out.decoys = int(a, value());
    else if (a === '--seed') out.seed = int(a, value());
    else if (a === '--phase') out.phase = value();
    else if (a === '--runs') out.runs = int(a, value());
    else if (a === '--timing') out.timing = true;
    else if (a === '--tail') out.tail = true;
    else if (a.startsWith('--')) throw new Error(`unknown option ${a} (see --help)`);
    else out.audit = a;
  }
  if (out.audit === '') throw new Error('give an audit folder (see --help)');
  return out;
}

/** Type-7 quantile of a sorted array. */
function quantile(sorted: number[], q: number): number {
  if (sorted.length === 0) return NaN;
  const h = (sorted.length - 1) * q;
  const lo = Math.floor(h);
  const hi = Math.min(lo + 1, sorted.length - 1);
  return (sorted[lo] as number) + (h - lo) * ((sorted[hi] as number) - (sorted[lo] as number));
}

/** The reference KS distance: the fitted CDF read by its own tail integral at every decoy. */
function ksPerPoint(scores: ArrayLike<number>, d: SkewNormal): number {
  const sorted = Float64Array.from(scores).sort();
  const n = sorted.length;
  let worst = 0;
  for (let i = 0; i < n; i += 1) {
    const f = skewNormalCdf(sorted[i] as number, d);
    worst = Math.max(worst, Math.abs(f - i / n), Math.abs((i + 1) / n - f));
  }
  return worst;
}

/** The smallest and largest value, e.g. the worst under- and over-estimate. */
function range(xs: number[]): string {
  if (xs.length === 0) return '–';
  return `${Math.min(...xs).toFixed(2)}, ${Math.max(...xs).toFixed(2)}`;
}

function medIqr(xs: number[]): string {
  if (xs.length === 0) return '–';
  const s = [...xs].sort((a, b) => a - b);
  return `${quantile(s, 0.5).toFixed(2)} [${quantile(s, 0.25).toFixed(2)}, ${quantile(s, 0.75).toFixed(2)}]`;
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const audit = await loadAudit(args.audit);
  const rows: Row[] = [];
  let space = 0;
  let runs = 0;
  const started = Date.now();
  const timing = { fast: 0, reference: 0, worstDiff: 0, worstKsDiff: 0, probes: 0 };
  for (const run of audit.runs) {
    if (run.status !== 'finished') continue;
    if (runs >= args.runs) break;
    runs += 1;
    // The report's own reader, checked against result.json; each vector kept in read order, one
    // per observation.
    const vectors: Float32Array[] = [];
    const outcome = await observeRun(run, {
      readScores: async (path, expected) => {
        const v = await readScoreFile(path, expected);
        vectors.push(v);
        return v;
      },
    });
    if (vectors.length !== outcome.observations.length)
      throw new Error(`${run.run_id}: ${vectors.length} score files for ${outcome.observations.length} observations`);
    for (const [i, o] of outcome.observations.entries()) {
      if (args.phase !== null && o.phase !== args.phase) continue;
      const scores = vectors[i] as Float32Array;
      space = o.space_size;
      if (args.decoys >= scores.length)
        throw new Error(`--decoys ${args.decoys} must be below the space size ${scores.length}`);
      // Leave out one candidate scoring exactly the true score (the true code or a tie: the same
      // multiset either way).
      const left = scores.indexOf(o.true_score);
      const others: number[] = [];
      for (let k = 0; k < scores.length; k += 1) if (k !== left) others.push(k);
      const rng = new Rng('bench-extrapolation', args.seed, run.run_id, o.probe_id, o.phase);
      const decoys = Float64Array.from(rng.sample(others, args.decoys), (k) => scores[k] as number);
      let atLeast = 0;
      for (const d of decoys) if (d >= o.true_score) atLeast += 1;
      const t0 = performance.now();
      const r = extrapolatedExposure(o.true_score, decoys);
      if (args.timing) {
        // Reference path, same probe, right after: the exact likelihood search and per-decoy KS.
        const t1 = performance.now();
        const fit = fitSkewNormal(decoys, { likelihood: 'exact' });
        const ks = ksPerPoint(decoys, fit.distribution);
        const fitted = -skewNormalLogSf(o.true_score, fit.distribution) / Math.LN2;
        const t2 = performance.now();
        timing.fast += t1 - t0;
        timing.reference += t2 - t1;
        timing.probes += 1;
        if (r.fitted_exposure !== null)
          timing.worstDiff = Math.max(timing.worstDiff, Math.abs(r.fitted_exposure - fitted));
        if (r.ks !== null) timing.worstKsDiff = Math.max(timing.worstKsDiff, Math.abs(r.ks - ks));
      }
      let spaceTail: number[] | null = null;
      if (args.tail && r.fit !== null) {
        const all = Float64Array.from(others, (k) => scores[k] as number).sort();
        const fit = r.fit.distribution;
        spaceTail = TAIL_RANKS.map(
          (k) => skewNormalLogSf(all[all.length - k] as number, fit) / Math.LN2 - Math.log2(k / all.length),
        );
      }
      rows.push({
        exact: o.exposure,
        tailError: r.tail_error_bits,
        spaceTail,
        fitted: r.fitted_exposure,
        reported: r.exposure,
        sampledRank: Math.log2(args.decoys + 1) - Math.log2(1 + atLeast),
        status: r.status,
      });
    }
  }
  const seconds = ((Date.now() - started) / 1000).toFixed(0);
  console.log(
    `audit ${audit.id}: ${runs} finished runs, ${rows.length} probes${args.phase ? ` (phase ${args.phase})` : ''}, |C| = ${space} (exact ceiling ${exposureCeiling(space).toFixed(2)} bits), ${args.decoys} decoys per probe (rank ceiling ${Math.log2(args.decoys + 1).toFixed(2)} bits), seed ${args.seed}; ${seconds} s`,
  );
  if (args.timing)
    console.log(
      `timing over ${timing.probes} probes: reference path / this path = ${(timing.reference / timing.fast).toFixed(1)}x (${(timing.fast / timing.probes).toFixed(1)} vs ${(timing.reference / timing.probes).toFixed(1)} ms per probe on this machine); largest |difference| of the extrapolated exposures ${timing.worstDiff.toExponential(2)} bits, of the KS distances ${timing.worstKsDiff.toExponential(2)}`,
    );
  console.log('');
  console.log(
    '| exact exposure | probes | extrapolated − exact, all fits: median [IQR] | all fits: min, max | reported only: median [IQR] | sampled rank − exact: median [IQR] | reported above the rank ceiling | flagged | withheld | unfit |',
  );
  console.log('|---|---|---|---|---|---|---|---|---|---|');
  const ceiling = exposureCeiling(space);
  const bands: [string, (x: number) => boolean][] = [
    ['< 4 bits', (x) => x < 4],
    ['4–10 bits', (x) => x >= 4 && x < 10],
    ['≥ 10 bits', (x) => x >= 10],
    ['≥ 10 bits, rank > 1', (x) => x >= 10 && x < ceiling],
    ['rank 1 (exact is only a floor)', (x) => x === ceiling],
    ['all', () => true],
  ];
  for (const [label, inBand] of bands) {
    const b = rows.filter((r) => inBand(r.exact));
    const errors = b.filter((r) => r.fitted !== null).map((r) => (r.fitted as number) - r.exact);
    const count = (s: ExtrapolationStatus): string =>
      b.length === 0
        ? '–'
        : `${b.filter((r) => r.status === s).length} (${((100 * b.filter((r) => r.status === s).length) / b.length).toFixed(0)}%)`;
    console.log(
      `| ${label} | ${b.length} | ${medIqr(errors)} | ${range(errors)} | ${medIqr(b.filter((r) => r.reported !== null).map((r) => (r.reported as number) - r.exact))} | ${medIqr(b.map((r) => r.sampledRank - r.exact))} | ${b.filter((r) => r.reported !== null && r.reported > Math.log2(args.decoys + 1)).length} | ${count('flagged')} | ${count('withheld')} | ${count('unfit')} |`,
    );
  }
  if (!args.tail) return;
  // Where the fitted tail departs from the real one: the diagnostic sees only the sampled decoys,
  // the extrapolation reads the tail beyond them.
  console.log('');
  console.log(
    `| exact exposure | probes | diagnostic: fitted − sampled log2 tail at the top max(5, n/100) decoys, median [IQR] | ${TAIL_RANKS.map((k) => `fitted − exhaustive log2 tail at the ${k === 1 ? 'highest' : `${k}th highest`} other code, median [IQR]`).join(' | ')} |`,
  );
  console.log(`|---|---|---|${TAIL_RANKS.map(() => '---|').join('')}`);
  for (const [label, inBand] of bands) {
    const b = rows.filter((r) => inBand(r.exact) && r.spaceTail !== null);
    console.log(
      `| ${label} | ${b.length} | ${medIqr(b.map((r) => r.tailError as number))} | ${TAIL_RANKS.map((_, i) => medIqr(b.map((r) => (r.spaceTail as number[])[i] as number))).join(' | ')} |`,
    );
  }
}

main().catch((error: unknown) => {
  console.error(`bench/extrapolation: ${(error as Error).message}`);
  process.exit(1);
});
