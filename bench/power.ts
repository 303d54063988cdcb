/**
 * Verdicts and power, checked by simulation on the coverage bench's generator
 * (`test/fixtures/synthetic-audit.ts`: paired differences, crossed canaries × run pairs, known
 * run, canary and canary × run standard deviations, true shift Δ).
 *
 * 1. Power: for each Δ and target number of run pairs, the decision rate (higher, lower or
 *    equivalent within the margin) over `--sims` simulated audits of that size, beside the rate
 *    the product predicts from a pilot of `--pilot-runs` run pairs (its measured variance
 *    components rescaled to the target size: `powerAdvice`/`decisionProbability` at the true Δ,
 *    averaged over as many simulated pilots). Target: within 5 points.
 * 2. Error rates: wrong verdicts per comparison (at Δ = 0 a "higher"/"lower"; at |Δ| ≥ margin an
 *    "equivalent"; any verdict of the wrong sign), and over a family of `--family` comparisons all
 *    at Δ = 0 (or all at Δ = margin), unadjusted and after the Holm step-down the report applies.
 *
 *   npx tsx bench/power.ts [--sims 1000] [--canaries 16] [--resamples 1000] [--seed 1] [--margin 1]
 *                          [--run 1.5] [--canary 2] [--interaction 1] [--shifts 0,1,2,3]
 *                          [--runs 3,5] [--pilot-runs 3] [--family 4] [--families N]
 */
import { recordStdout } from './records.js';
import { parseArgs } from 'node:util';
import { bootstrapMedian, clusteredSample, type MedianInterval } from '../src/metrics/bootstrap.js';
import {
  decisionProbability,
  holmAdjust,
  readVerdict,
  rescaleComponents,
  scaledVariance,
  spreadOf,
  testSpread,
  type VerdictKind,
} from '../src/metrics/verdict.js';
import { Rng } from '../src/random.js';
import { syntheticPaired, type SyntheticSpec } from '../test/fixtures/synthetic-audit.js';
import { syntheticOptions, syntheticSettings } from './synthetic-options.js';

const { values } = parseArgs({
  options: {
    ...syntheticOptions({ sims: '1000', resamples: '1000', shifts: '0,1,2,3' }),
    runs: { type: 'string', default: '3,5' },
    'pilot-runs': { type: 'string', default: '3' },
    family: { type: 'string', default: '4' },
    families: { type: 'string' },
  },
});
if (values.help) {
  process.stdout.write(`usage: npx tsx bench/power.ts [--sims N] [--canaries N] [--resamples N] [--seed N] [--margin BITS]
       [--run SD] [--canary SD] [--interaction SD] [--shifts LIST] [--runs LIST] [--pilot-runs N] [--family M]
       [--families F] [--record NAME]
Predicted vs simulated decision rates of the report's verdicts, and their error rates (docs/metrics.md,
"Verdicts and power"). Defaults: 1000 audits per row, 16 canaries, 1000 resamples, margin 1 bit,
sd run 1.5 / canary 2 / canary x run 1 bits (the coverage bench's), shifts 0,1,2,3 bits, targets of
3 and 5 run pairs predicted from 3-run-pair pilots, families of 4 (as many as --sims audits make, or
--families F per row). Exit 1 when a power row is more than
5 points off. --record NAME also writes the output as the benchmark record
bench/results/<date>-NAME.md.
`);
  process.exit(0);
}
if (values.record !== undefined)
  recordStdout(values.record, "verdicts' predicted vs simulated decision rates and error rates (`bench/power.ts`)");
const { sims, canaries, resamples, seed, margin, components, shifts } = syntheticSettings(values);
const alpha = 0.05;
const targets = values.runs.split(',').map(Number);
const pilotRuns = Number(values['pilot-runs']);
const familySize = Number(values.family);

function simulate(runs: number, shift: number, rng: Rng, label: string): MedianInterval {
  const spec: SyntheticSpec = { design: 'crossed', runs, canaries, components };
  const s = syntheticPaired(rng, spec, shift);
  return bootstrapMedian(clusteredSample(s.values, s.runs, s.canaries), { seed, label, resamples }) as MedianInterval;
}

function verdictOf(i: MedianInterval): {
  verdict: VerdictKind;
  p: { p_difference: number; p_equivalence: number };
  estimate: number;
} {
  const t = testSpread(spreadOf(i, alpha), margin);
  return { ...readVerdict(t, t.p_difference <= alpha, t.p_equivalence <= alpha), p: t, estimate: t.estimate };
}

function wrong(v: VerdictKind, shift: number): boolean {
  if (v === 'undecided') return false;
  if (v === 'equivalent') return Math.abs(shift) >= margin;
  if (shift === 0) return true;
  return (v === 'higher') !== shift > 0;
}

const pct = (x: number): string => `${(100 * x).toFixed(1)}%`;
console.log(
  `paired differences, crossed; sd run ${components.run}, canary ${components.canary}, canary×run ${components.interaction} bits; ${canaries} canaries; margin ±${margin} bits, α ${alpha}; ${sims} audits per row; ${resamples} resamples; seed ${seed}`,
);
console.log(
  '| Δ (bits) | run pairs | predicted P(decided) from a ' +
    pilotRuns +
    '-run-pair pilot | simulated P(decided) | gap (points) | higher / lower / equivalent | wrong verdicts |',
);
console.log('|---|---|---|---|---|---|---|');
let worst = 0;
let s = seed;
for (const shift of shifts) {
  // Pilots: each one's measured components, rescaled to every target size.
  const pilotRng = Rng.fromSeed((s += 1));
  const predicted = new Map(targets.map((t) => [t, 0]));
  for (let i = 0; i < sims; i += 1) {
    const pilot = simulate(pilotRuns, shift, pilotRng, `pilot-${shift}-${i}`);
    const c = pilot.components ?? [];
    for (const t of targets) {
      const v = scaledVariance(rescaleComponents(c, t, canaries), 1, 1);
      predicted.set(
        t,
        (predicted.get(t) as number) + decisionProbability(shift, Math.sqrt(v.variance), v.df, margin, alpha) / sims,
      );
    }
  }
  for (const t of targets) {
    const rng = Rng.fromSeed((s += 1));
    const counts = { higher: 0, lower: 0, equivalent: 0, undecided: 0 };
    let errors = 0;
    for (let i = 0; i < sims; i += 1) {
      const v = verdictOf(simulate(t, shift, rng, `audit-${shift}-${t}-${i}`)).verdict;
      counts[v] += 1;
      if (wrong(v, shift)) errors += 1;
    }
    const decided = (sims - counts.undecided) / sims;
    const p = predicted.get(t) as number;
    worst = Math.max(worst, Math.abs(p - decided));
    console.log(
      `| ${shift} | ${t} | ${pct(p)} | ${pct(decided)} | ${(100 * (p - decided)).toFixed(1)} | ${counts.higher} / ${counts.lower} / ${counts.equivalent} | ${errors}/${sims} (${pct(errors / sims)}) |`,
    );
  }
}

// Families of m comparisons, all at Δ = 0 (a wrong verdict: higher or lower) or all at Δ = margin
// (a wrong verdict: equivalent): the share of families with any wrong verdict.
console.log('');
console.log(
  `| family of ${familySize}, all at Δ | run pairs | families with a wrong verdict, unadjusted | after Holm |`,
);
console.log('|---|---|---|---|');
// Families per row: --families, else as many as --sims audits make.
const families = values.families ? Number(values.families) : Math.max(1, Math.floor(sims / familySize));
for (const shift of [0, margin]) {
  for (const t of targets) {
    const rng = Rng.fromSeed((s += 1));
    let raw = 0;
    let holm = 0;
    for (let f = 0; f < families; f += 1) {
      const members = Array.from({ length: familySize }, (_, k) =>
        verdictOf(simulate(t, shift, rng, `family-${shift}-${t}-${f}-${k}`)),
      );
      if (members.some((m) => wrong(m.verdict, shift))) raw += 1;
      const adjusted = holmAdjust(members.map((m) => m.p));
      if (
        members.some((m, k) =>
          wrong(
            readVerdict(
              m,
              (adjusted[k] as { p_difference: number }).p_difference <= alpha,
              (adjusted[k] as { p_equivalence: number }).p_equivalence <= alpha,
            ).verdict,
            shift,
          ),
        )
      )
        holm += 1;
    }
    console.log(
      `| ${shift} | ${t} | ${raw}/${families} (${pct(raw / families)}) | ${holm}/${families} (${pct(holm / families)}) |`,
    );
  }
}
console.log(
  worst <= 0.05
    ? 'every power row within 5 points'
    : `a power row is ${(100 * worst).toFixed(1)} points off (target: within 5)`,
);
process.exitCode = worst <= 0.05 ? 0 : 1;
