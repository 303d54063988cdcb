/**
 * False-alarm rate of the report's `null_broken` warning on audits whose null holds: in each
 * simulated audit, k null comparisons (members and non-members drawn from one distribution),
 * each tested as the report does (`nullVerdict` at `nullLevel(0.95, k)`: Clopper–Pearson ε > 0 or
 * TPR at 1% FPR above the FPR's interval, 2k tests, Bonferroni). An audit raises the warning when
 * any of its k comparisons is broken; the target is at most 5%.
 *
 *   npx tsx bench/null-check.ts [--audits 1000] [--seed 1] [--shift 0]
 *
 * `--shift d` breaks the null instead: the "members" draw x (or the normal score) d higher, and
 * the rate is the warning's power against that break.
 *
 * Score shapes: x = centre + 2·(canary effect) + 3·(canary × run noise), standard normals; `normal`
 * scores x itself (centre 0); `exposure` and `ceiling` score the exposure of the rank
 * ⌈10,000 · 2^−max(0, x)⌉ (centre 3: a pile at the 0-bit floor; centre 11: a pile at the 13.29-bit
 * ceiling), so ties and both bounds are as in real audits. A canary's score is its mean over the
 * design's runs, as the report pools seeds.
 */
import { parseArgs } from 'node:util';
import { nullLevel, nullVerdict } from '../src/report/control-checks.js';

const { values } = parseArgs({
  options: {
    audits: { type: 'string', default: '1000' },
    seed: { type: 'string', default: '1' },
    shift: { type: 'string', default: '0' },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (values.help) {
  console.log(
    'usage: npx tsx bench/null-check.ts [--audits N (default 1000)] [--seed S (default 1)] [--shift D (default 0)]\nPrints the share of simulated audits that raise null_broken, per score shape and design: healthy audits (false alarms) with --shift 0, members drawn D higher (power) otherwise.',
  );
  process.exit(0);
}
const audits = Number(values.audits);
const seed = Number(values.seed);
const shift = Number(values.shift);
if (!(Number.isInteger(audits) && audits > 0) || !Number.isInteger(seed) || !Number.isFinite(shift)) {
  console.error(
    `--audits must be a positive integer, --seed an integer and --shift a number, got ${values.audits}, ${values.seed} and ${values.shift}`,
  );
  process.exit(2);
}

/** mulberry32: small, seeded, good enough for a simulation. */
function rng(s: number): () => number {
  let a = s >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
function normal(r: () => number): number {
  return Math.sqrt(-2 * Math.log(1 - r())) * Math.cos(2 * Math.PI * r());
}
const SPACE = 10000;
const exposureOf = (x: number): number => Math.log2(SPACE) - Math.log2(Math.min(SPACE, Math.ceil(SPACE * 2 ** -x)));
// x = centre + shift (members) + 2·canary effect + 3·canary×run noise; a canary's score is its
// mean over the runs that hold it, as the report pools them.
const shapes: Record<string, { centre: number; transform: (x: number) => number }> = {
  normal: { centre: 0, transform: (x) => x },
  exposure: { centre: 3, transform: (x) => exposureOf(Math.max(0, x)) },
  ceiling: { centre: 11, transform: (x) => exposureOf(Math.max(0, x)) },
};
const designs = [
  { name: 'no-canary control, 6 vs 20, 1 run', members: 6, others: 20, runs: 1, k: 1 },
  { name: 'no-canary control, 16 vs 16, 3 runs', members: 16, others: 16, runs: 3, k: 1 },
  { name: 'no-canary controls, 16 vs 16, 3 runs', members: 16, others: 16, runs: 3, k: 3 },
  { name: 'held-out halves, 8 vs 8, 18 runs (quickstart)', members: 8, others: 8, runs: 18, k: 1 },
  { name: 'held-out halves, 50 vs 50, 3 runs', members: 50, others: 50, runs: 3, k: 1 },
];
function canaryScore(
  r: () => number,
  centre: number,
  d: number,
  runs: number,
  transform: (x: number) => number,
): number {
  const effect = 2 * normal(r);
  let sum = 0;
  for (let i = 0; i < runs; i += 1) sum += transform(centre + d + effect + 3 * normal(r));
  return sum / runs;
}

console.log(
  `null_broken on ${shift === 0 ? 'healthy audits' : `audits whose members draw ${shift} higher`}: ${audits} audits per row, seed ${seed}, δ = 1e-5, family level 95%`,
);
console.log('| shape | design | k | each test at | audits warned | rate |');
console.log('|---|---|---|---|---|---|');
for (const [shape, { centre, transform }] of Object.entries(shapes)) {
  for (const d of designs) {
    const r = rng(seed * 7919 + d.members * 31 + d.runs * 7 + d.k);
    const each = nullLevel(0.95, d.k);
    let warned = 0;
    for (let a = 0; a < audits; a += 1) {
      let broken = false;
      for (let c = 0; c < d.k; c += 1) {
        const scored = [
          ...Array.from({ length: d.members }, () => ({
            score: canaryScore(r, centre, shift, d.runs, transform),
            member: true,
          })),
          ...Array.from({ length: d.others }, () => ({
            score: canaryScore(r, centre, 0, d.runs, transform),
            member: false,
          })),
        ];
        if (nullVerdict(scored, each, 1e-5).broken) broken = true;
      }
      if (broken) warned += 1;
    }
    console.log(
      `| ${shape} | ${d.name} | ${d.k} | ${(100 * each).toFixed(2)}% | ${warned} | ${((100 * warned) / audits).toFixed(1)}% |`,
    );
  }
}
