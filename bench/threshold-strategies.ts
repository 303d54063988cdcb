/**
 * The Clopper–Pearson ε bound under jax_privacy's Split and MultiSplit strategies on the inputs of
 * its own tightness tests (google-deepmind/jax_privacy `tests/auditing_test.py`,
 * `test_epsilon_clopper_pearson_tight` with `Split(seed=0)` and
 * `test_epsilon_clopper_pearson_tight_multi_split` with `MultiSplit(seed=0)`): members
 * `_deterministic_normal(mu, 1, n)` against non-members `_deterministic_normal(0, 1, ratio · n)`,
 * δ = 0.1, printed against the true ε of μ-GDP at δ (jax_privacy asserts below it and within
 * relative 0.2). jax_privacy runs n = 2,000,000 (Split, significance 0.2) and n = 100,000 with
 * 100 splits (MultiSplit, significance 0.1); the sizes here are arguments (seeds differ from
 * numpy's, so the splits are not jax_privacy's):
 *
 *   npx tsx bench/threshold-strategies.ts [n_split] [n_multisplit] [splits]   (default 5000 4000 11)
 *
 * Then the cost of each strategy as a ratio to Bonferroni, measured side by side, for the three
 * bounds that take one, on a report-sized pool (500 members N(1, 1), 500 non-members N(0, 1));
 * and how often each bound under each strategy claims ε > 0 on null pools (60 canaries, each a
 * member by a fair coin, scores uniform on 0..7 with many ties, independent of membership) at
 * 80% confidence: a valid bound does so at most 20% of the time.
 */
import { gdpEpsilonAt, normalPpf } from '../src/metrics/gaussian.js';
import { clopperPearsonEpsilon, oneRunBound, type ScoredCanary } from '../src/metrics/privacy.js';
import { fdpOneRunBound } from '../src/metrics/privacy-fdp.js';
import type { ThresholdStrategy } from '../src/metrics/threshold-strategy.js';
import { Rng } from '../src/random.js';

const det = (mu: number, n: number): number[] => Array.from({ length: n }, (_, i) => normalPpf((i + 0.5) / n) + mu);
const pool = (ins: number[], outs: number[]): ScoredCanary[] => [
  ...ins.map((score) => ({ score, member: true })),
  ...outs.map((score) => ({ score, member: false })),
];
const [nSplit, nMulti, samples] = [process.argv[2] ?? '5000', process.argv[3] ?? '4000', process.argv[4] ?? '11'].map(
  Number,
) as [number, number, number];

console.log(`Split(seed 0), n = ${nSplit}, significance 0.2, δ = 0.1: mu, n_out/n_in, ε, true ε, relative`);
for (const mu of [0.3, 1, 1.5])
  for (const ratio of [0.5, 1, 1.5]) {
    const b = clopperPearsonEpsilon(pool(det(mu, nSplit), det(0, Math.floor(nSplit * ratio))), 0.1, 0.8, {
      kind: 'split',
      fraction: 0.5,
      seed: 0,
    });
    const truth = gdpEpsilonAt(mu, 0.1);
    console.log(mu, ratio, b?.epsilon.toFixed(5), truth.toFixed(5), ((b?.epsilon as number) / truth - 1).toFixed(4));
  }
console.log(
  `MultiSplit(${samples} splits, seed 0), n = ${nMulti}, significance 0.1, δ = 0.1: mu, n_out/n_in, ε, true ε, relative`,
);
for (const mu of [0.7, 1, 1.5])
  for (const ratio of [0.5, 1, 1.5]) {
    const b = clopperPearsonEpsilon(pool(det(mu, nMulti), det(0, Math.floor(nMulti * ratio))), 0.1, 0.9, {
      kind: 'multisplit',
      fraction: 0.5,
      seed: 0,
      samples,
    });
    const truth = gdpEpsilonAt(mu, 0.1);
    console.log(mu, ratio, b?.epsilon.toFixed(5), truth.toFixed(5), ((b?.epsilon as number) / truth - 1).toFixed(4));
  }

console.log(
  'Cost against Bonferroni, 1,000 canaries (median of 5 timings each): bound, split / bonferroni, multisplit(100) / bonferroni',
);
const report = pool(det(1, 500), det(0, 500));
const strategies: ThresholdStrategy[] = [
  { kind: 'bonferroni' },
  { kind: 'split', fraction: 0.5, seed: 0 },
  { kind: 'multisplit', fraction: 0.5, seed: 0, samples: 100 },
];
for (const [name, bound] of [
  ['Clopper–Pearson', clopperPearsonEpsilon],
  ['binomial one run', oneRunBound],
  ['f-DP one run', fdpOneRunBound],
] as const) {
  const ms = strategies.map((st) => {
    const times: number[] = [];
    for (let i = 0; i < 5; i += 1) {
      // Another δ each time, so the f-DP bound's memoised μ is not reused; Clopper–Pearson intervals
      // stay memoised by (k, n, level), as they are across the runs of one report.
      const t0 = performance.now();
      bound(report, 1e-5 * (1 + i / 10), 0.95, st);
      times.push(performance.now() - t0);
    }
    return times.sort((a, b) => a - b)[2] as number;
  });
  console.log(
    name,
    ((ms[1] as number) / (ms[0] as number)).toFixed(1),
    ((ms[2] as number) / (ms[0] as number)).toFixed(1),
  );
}

const trials = 300;
console.log(
  `Null pools, ${trials} trials, 80% confidence: strategy, share with ε > 0 (Clopper–Pearson, binomial one run, f-DP one run)`,
);
const rng = new Rng('threshold-strategies-null');
const nulls = Array.from({ length: trials }, () =>
  Array.from({ length: 60 }, () => ({ score: Math.floor(rng.float() * 8), member: rng.float() < 0.5 })),
);
for (const st of [
  strategies[0],
  strategies[1],
  { kind: 'multisplit', fraction: 0.5, seed: 0, samples: 11 },
] as ThresholdStrategy[]) {
  const shares = [clopperPearsonEpsilon, oneRunBound, fdpOneRunBound].map(
    (bound) => nulls.filter((p) => (bound(p, 1e-5, 0.8, st)?.epsilon ?? 0) > 0).length / trials,
  );
  console.log(st.kind, ...shares.map((x) => x.toFixed(3)));
}
