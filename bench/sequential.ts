/**
 * Sequential replicates checked by simulation on the coverage bench's generator
 * (`test/fixtures/synthetic-audit.ts`: paired differences, crossed canaries × run pairs, known
 * run, canary and canary × run standard deviations, true shift Δ).
 *
 * Each simulated audit draws `--max` run pairs once; look k reads the first n_k of them (n = min,
 * min + 1, …, max: a look is a prefix of the next, as the controller's looks are) with the report's
 * bootstrap interval and verdict at that look's α, and stops at the first decided verdict or at
 * max (src/metrics/sequential.ts). Per true Δ (0; inside the margin; at and beyond it) and rule:
 * - decided: share of audits that end higher, lower or equivalent;
 * - wrong: share that end with a wrong verdict (at Δ = 0 higher/lower; equivalent at |Δ| ≥ margin;
 *   a verdict of the wrong sign);
 * - coverage: share whose reported interval (the stopping look's, at 1 − its α) holds Δ;
 * - seeds: mean run pairs used, against max for the fixed design.
 * - predicted decided / run pairs: what `plan GRID --power --pilot` would print for the rule
 *   (src/metrics/sequential-power.ts: correlated looks), from each audit's first `--min` run pairs
 *   read as a pilot (its variance components, the true Δ as the effect), averaged over the audits;
 *   beside it the bound that holds whatever the looks' correlation (≥) and the looks read as
 *   independent tests (indep.).
 * Rules: Pocock- and O'Brien–Fleming-type spending; "no spending" (α at every look: the error
 * control a naive "add seeds until significant" loses); the fixed design at max run pairs.
 *
 *   npx tsx bench/sequential.ts [--sims 400] [--min 3] [--max 8] [--canaries 16] [--resamples 500]
 *                               [--seed 1] [--margin 1] [--run 1.5] [--canary 2] [--interaction 1]
 *                               [--shifts 0,0.5,1,2,4]
 */
import { recordStdout } from './records.js';
import { parseArgs } from 'node:util';
import { bootstrapMedian, clusteredSample, type MedianInterval } from '../src/metrics/bootstrap.js';
import { lookSchedule, type Look, type SpendingFunction } from '../src/metrics/sequential.js';
import { sequentialPower } from '../src/metrics/sequential-power.js';
import { readVerdict, spreadOf, testSpread, type VerdictKind } from '../src/metrics/verdict.js';
import { Rng } from '../src/random.js';
import { syntheticPaired, type SyntheticSample } from '../test/fixtures/synthetic-audit.js';
import { syntheticOptions, syntheticSettings } from './synthetic-options.js';

const { values } = parseArgs({
  options: {
    ...syntheticOptions({ sims: '400', resamples: '500', shifts: '0,0.5,1,2,4' }),
    min: { type: 'string', default: '3' },
    max: { type: 'string', default: '8' },
  },
});
if (values.help) {
  process.stdout.write(`usage: npx tsx bench/sequential.ts [--sims N] [--min N] [--max N] [--canaries N] [--resamples N]
       [--seed N] [--margin BITS] [--run SD] [--canary SD] [--interaction SD] [--shifts LIST] [--record NAME]
Error rates, interval coverage and seeds used by sequential replicates (replicates: {until: decided})
against the fixed design at max seeds, on the coverage bench's generator (docs/metrics.md,
"Sequential replicates"). Defaults: 400 audits per row, looks at 3..8 run pairs, 16 canaries, 500
resamples, margin 1 bit, sd run 1.5 / canary 2 / canary x run 1 bits, shifts 0,0.5,1,2,4 bits.
Exit 1 when a spending rule's wrong-verdict rate or interval miss rate at some shift is above
α = 0.05 by more than its binomial noise (2 standard errors). --record NAME also writes the output as the benchmark record
bench/results/<date>-NAME.md.
`);
  process.exit(0);
}
if (values.record !== undefined)
  recordStdout(values.record, 'sequential replicates: error rates, coverage and seeds used (`bench/sequential.ts`)');
const { sims, canaries, resamples, seed, margin, components, shifts } = syntheticSettings(values);
const min = Number(values.min);
const max = Number(values.max);
const alpha = 0.05;

/** The first `n` run pairs of a sample (values are laid out run pair by run pair). */
function prefix(s: SyntheticSample, n: number): SyntheticSample {
  const k = n * canaries;
  return { ...s, values: s.values.slice(0, k), runs: s.runs.slice(0, k), canaries: s.canaries.slice(0, k) };
}

interface Outcome {
  verdict: VerdictKind;
  covered: boolean;
  seeds: number;
}

function read(
  s: SyntheticSample,
  n: number,
  level: number,
  label: string,
): { verdict: VerdictKind; i: MedianInterval } {
  const p = prefix(s, n);
  const i = bootstrapMedian(clusteredSample(p.values, p.runs, p.canaries), {
    seed,
    label,
    resamples,
    confidence: 1 - level,
  }) as MedianInterval;
  const t = testSpread(spreadOf(i, level), margin);
  return { verdict: readVerdict(t, t.p_difference <= level, t.p_equivalence <= level).verdict, i };
}

/** Looks in order; stop at the first decided one or the last. */
function sequential(s: SyntheticSample, looks: readonly Pick<Look, 'seeds' | 'alpha'>[], label: string): Outcome {
  for (const [k, look] of looks.entries()) {
    const { verdict, i } = read(s, look.seeds, look.alpha, `${label}-${look.seeds}`);
    if (verdict !== 'undecided' || k === looks.length - 1)
      return { verdict, covered: i.lo <= s.truth && s.truth <= i.hi, seeds: look.seeds };
  }
  throw new Error('no look');
}

function wrong(v: VerdictKind, shift: number): boolean {
  if (v === 'undecided') return false;
  if (v === 'equivalent') return Math.abs(shift) >= margin;
  if (shift === 0) return true;
  return (v === 'higher') !== shift > 0;
}

const rules: { name: string; looks: Pick<Look, 'seeds' | 'alpha'>[] }[] = [
  ...(['pocock', 'obrien-fleming'] as SpendingFunction[]).map((spending) => ({
    name: spending === 'pocock' ? 'Pocock-type spending' : "O'Brien–Fleming-type spending",
    looks: lookSchedule({ min, max, spending, alpha }),
  })),
  {
    name: 'no spending (α at every look)',
    looks: Array.from({ length: max - min + 1 }, (_, k) => ({ seeds: min + k, alpha })),
  },
  { name: `fixed design, ${max} run pairs`, looks: [{ seeds: max, alpha }] },
];

const pct = (x: number): string => `${(100 * x).toFixed(1)}%`;
console.log(
  `paired differences, crossed; sd run ${components.run}, canary ${components.canary}, canary×run ${components.interaction} bits; ${canaries} canaries; looks at ${min}..${max} run pairs; margin ±${margin} bits, α ${alpha}; ${sims} audits per row; ${resamples} resamples; seed ${seed}`,
);
console.log(
  '| Δ (bits) | rule | decided | predicted decided (≥; indep.) | wrong verdicts | interval coverage | mean run pairs | predicted run pairs | run pairs saved vs fixed |',
);
console.log('|---|---|---|---|---|---|---|---|---|');
const noise = 2 * Math.sqrt((alpha * (1 - alpha)) / sims);
let failed = false;
let s = seed;
for (const shift of shifts) {
  // The same simulated audits for every rule: the rules differ only in when they read them.
  const rng = Rng.fromSeed((s += 1));
  const audits = Array.from({ length: sims }, () =>
    syntheticPaired(rng, { design: 'crossed', runs: max, canaries, components }, shift),
  );
  // Each audit's first `min` run pairs as a pilot: the components `plan --power --pilot` plans with.
  const pilots = audits.map((a, i) => read(a, min, alpha, `pilot-${shift}-${i}`).i.components ?? []);
  for (const rule of rules) {
    const outcomes = audits.map((a, i) => sequential(a, rule.looks, `${shift}-${i}`));
    const predictions = pilots
      .map((c) => sequentialPower(shift, c, canaries, rule.looks, margin))
      .filter((p) => p !== null);
    const mean = (f: (p: (typeof predictions)[number]) => number): number =>
      predictions.reduce((n, p) => n + f(p), 0) / Math.max(1, predictions.length);
    const decided = outcomes.filter((o) => o.verdict !== 'undecided').length / sims;
    const wrongRate = outcomes.filter((o) => wrong(o.verdict, shift)).length / sims;
    const coverage = outcomes.filter((o) => o.covered).length / sims;
    const seeds = outcomes.reduce((n, o) => n + o.seeds, 0) / sims;
    if (
      /spending/.test(rule.name) &&
      !/^no /.test(rule.name) &&
      (wrongRate > alpha + noise || 1 - coverage > alpha + noise)
    )
      failed = true;
    console.log(
      `| ${shift} | ${rule.name} | ${pct(decided)} | ${pct(mean((p) => p.probability))} (≥ ${pct(mean((p) => p.at_least))}; ${pct(mean((p) => p.independent))}) | ${pct(wrongRate)} | ${pct(coverage)} | ${seeds.toFixed(2)} | ${mean((p) => p.expected_seeds).toFixed(2)} | ${pct(1 - seeds / max)} |`,
    );
  }
}
console.log(
  failed
    ? `a spending rule's error or miss rate is above α + ${pct(noise)} at some shift`
    : `every spending rule's wrong-verdict and interval miss rates within α + ${pct(noise)} (2 se of ${sims} audits)`,
);
process.exitCode = failed ? 1 : 0;
