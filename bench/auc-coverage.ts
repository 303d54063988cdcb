/**
 * Coverage of the crossed canary × run AUC interval (`crossedAuc`, src/metrics/privacy-auc.ts)
 * against the DeLong interval that treats every (run, canary) score as independent, on simulated
 * cells where the truth is known.
 *
 *   npx tsx bench/auc-coverage.ts            (400 cells per setting, 600 resamples)
 *   npx tsx bench/auc-coverage.ts --reps 200
 *
 * Model: R runs × C canaries (half members, the same canaries and roles in every run). Canary k's
 * score in run r is b_k + e_rk, plus μ + a_r for a member: b_k ~ N(0, 1) (canary effect), e_rk ~
 * N(0, 1) (residual), a_r ~ N(0, τ²) (the run's own memorization strength). The target is the
 * population AUC over runs and canaries, E_a Φ((μ + a)/2), computed by quadrature.
 */
import { crossedAuc, type AucRun } from '../src/metrics/privacy-auc.js';
import { normalCdf } from '../src/metrics/gaussian.js';
import { membershipAuc } from '../src/metrics/privacy.js';
import { Rng } from '../src/random.js';

const HELP = `usage: npx tsx bench/auc-coverage.ts [--reps N]

Coverage of the crossed canary x run AUC interval and of the independent-scores DeLong interval.
  --reps N   simulated cells per setting (default 400)
  --help     this text`;

const argv = process.argv.slice(2);
if (argv.includes('--help')) {
  console.log(HELP);
  process.exit(0);
}
const repsAt = argv.indexOf('--reps');
const reps = repsAt >= 0 ? Number(argv[repsAt + 1]) : 400;
if (!Number.isInteger(reps) || reps < 1) throw new Error(`--reps must be a positive integer (see --help)`);

const mu = 1;
/** E_a Φ((μ + a)/2), a ~ N(0, τ²), by the midpoint rule on ±8τ. */
function truth(tau: number): number {
  if (tau === 0) return normalCdf(mu / 2);
  const steps = 4000;
  let sum = 0;
  for (let i = 0; i < steps; i += 1) {
    const z = -8 + (16 * (i + 0.5)) / steps;
    sum += normalCdf((mu + tau * z) / 2) * Math.exp(-0.5 * z * z);
  }
  return (sum * (16 / steps)) / Math.sqrt(2 * Math.PI);
}

console.log(`AUC interval coverage at 95%, ${reps} simulated cells per row, μ = ${mu}, 600 resamples`);
console.log(
  '| runs | canaries (in · out) | run sd τ | true AUC | crossed: coverage | crossed: median width | independent DeLong: coverage | DeLong: median width |',
);
console.log('|---|---|---|---|---|---|---|---|');
for (const [runs, half, tau] of [
  [3, 20, 0],
  [3, 20, 0.5],
  [5, 20, 0.5],
  [5, 50, 0.5],
  [5, 20, 1],
] as const) {
  const target = truth(tau);
  let hitCrossed = 0;
  let hitIid = 0;
  const widthCrossed: number[] = [];
  const widthIid: number[] = [];
  for (let rep = 0; rep < reps; rep += 1) {
    const rng = new Rng('auc-coverage', runs, half, tau, rep);
    const g = (): number => Math.sqrt(-2 * Math.log(1 - rng.float())) * Math.cos(2 * Math.PI * rng.float());
    const canaries = Array.from({ length: 2 * half }, (_, k) => ({ key: `c${k}`, member: k < half, b: g() }));
    const cell: AucRun[] = Array.from({ length: runs }, (_, r) => {
      const a = tau * g();
      return {
        run_id: `r${r}`,
        canaries: canaries.map((c) => ({ key: c.key, member: c.member, score: c.b + g() + (c.member ? mu + a : 0) })),
      };
    });
    const c = crossedAuc(cell, { seed: rep, resamples: 600 });
    if (c && c.lo <= target && target <= c.hi) hitCrossed += 1;
    if (c) widthCrossed.push(c.hi - c.lo);
    // Every (run, canary) as an independent draw: one pool, DeLong.
    const pooled = membershipAuc(cell.flatMap((r) => r.canaries));
    if (pooled && pooled.lo <= target && target <= pooled.hi) hitIid += 1;
    if (pooled) widthIid.push(pooled.hi - pooled.lo);
  }
  const med = (xs: number[]): string => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]?.toFixed(3) ?? '–';
  console.log(
    `| ${runs} | ${half} · ${half} | ${tau} | ${target.toFixed(3)} | ${((100 * hitCrossed) / reps).toFixed(1)}% | ${med(widthCrossed)} | ${((100 * hitIid) / reps).toFixed(1)}% | ${med(widthIid)} |`,
  );
}
