/**
 * Coverage of the report's 95% intervals, measured on seeded synthetic audits with known canary,
 * run and canary × run variance components (`test/fixtures/synthetic-audit.ts`): for each design
 * (crossed: the same canaries in every run; nested: each run its own), 3 and 5 runs, the median
 * of one arm and a paired difference, the share of simulated audits whose interval holds the true
 * value. Target: 93–97% (a binomial 95% band around 0.95 with 1,000 audits is ±1.4 points).
 *
 *   npx tsx bench/coverage-normal.ts [--sims 1000] [--canaries 16] [--resamples 2000] [--seed 1]
 *                                    [--run 1.5] [--canary 2] [--interaction 1] [--runs 3,5] [--plain]
 *
 * The data's real shape (a discrete rank transform with a floor and a ceiling, skewed arms,
 * 2 runs, every printed estimand) is `bench/coverage.ts`; this one keeps the unbounded normal
 * generator the variance-component corrections were first measured on (docs/metrics.md).
 *
 * `--plain` measures the uncorrected percentile intervals instead (two-way for crossed, two-stage
 * for nested), the reason the report studentises with a variance-component correction.
 */
import { parseArgs } from 'node:util';
import { coverage, plainCoverage, type CoverageRow } from '../test/fixtures/synthetic-audit.js';

const { values } = parseArgs({
  options: {
    sims: { type: 'string', default: '1000' },
    canaries: { type: 'string', default: '16' },
    resamples: { type: 'string', default: '2000' },
    seed: { type: 'string', default: '1' },
    run: { type: 'string', default: '1.5' },
    canary: { type: 'string', default: '2' },
    interaction: { type: 'string', default: '1' },
    runs: { type: 'string', default: '3,5' },
    plain: { type: 'boolean', default: false },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (values.help) {
  console.log(`Coverage of the report's 95% median intervals on unbounded normal synthetic audits.

usage: npx tsx bench/coverage-normal.ts [options]

  --sims N          simulated audits per row (default 1000)
  --canaries N      canaries per run (default 16)
  --resamples N     bootstrap resamples (default 2000)
  --seed N          first seed; each row adds 1 (default 1)
  --run SD          run effect sd, bits (default 1.5)
  --canary SD       canary effect sd, bits (default 2)
  --interaction SD  canary × run effect sd, bits (default 1)
  --runs LIST       run counts (default 3,5)
  --plain           the uncorrected percentile intervals instead
  -h, --help        this text`);
  process.exit(0);
}
const sims = Number(values.sims);
const canaries = Number(values.canaries);
const resamples = Number(values.resamples);
const seed = Number(values.seed);
const components = { run: Number(values.run), canary: Number(values.canary), interaction: Number(values.interaction) };
const runCounts = values.runs.split(',').map(Number);

console.log(
  `components (sd): run ${components.run}, canary ${components.canary}, canary×run ${components.interaction}; ${canaries} canaries; ${sims} audits per row; ${resamples} resamples; seed ${seed}`,
);
console.log('| design | statistic | runs | covered | coverage | mean width | resampling read |');
console.log('|---|---|---|---|---|---|---|');
const rows: CoverageRow[] = [];
let s = seed;
for (const design of ['crossed', 'nested'] as const) {
  for (const statistic of ['median', 'paired difference'] as const) {
    for (const runs of runCounts) {
      const t = performance.now();
      const row = (values.plain ? plainCoverage : coverage)(
        { design, runs, canaries, components },
        statistic,
        sims,
        (s += 1),
        resamples,
      );
      rows.push(row);
      console.log(
        `| ${design} | ${statistic} | ${runs} | ${row.covered}/${row.sims} | ${(100 * row.coverage).toFixed(1)}% | ${row.meanWidth.toFixed(2)} | ${row.detected} |` +
          (process.env.COVERAGE_TIMES ? ` ${((performance.now() - t) / 1000).toFixed(1)} s` : ''),
      );
    }
  }
}
const outside = rows.filter((r) => r.coverage < 0.93 || r.coverage > 0.97);
console.log(outside.length === 0 ? 'all rows within 93–97%' : `${outside.length} row(s) outside 93–97%`);
process.exitCode = outside.length === 0 ? 0 : 1;
