/**
 * The Redis-outage drill with production locks (30 s): two workers, one slot each, train stand-in
 * runs; Redis stops while they train and comes back after 5 s (under the lock: nothing moves),
 * 35 s (just over it) and 120 s (four locks). Prints, per outage and in all:
 *   runs lost: 0, trained twice: 0, results identical: N/N
 *
 *   npx tsx bench/redis-outage.ts [--outages 5,35,120] [--lock-s 30] [--runs 2] [--updates 2400]
 *
 * Takes about (outage + training) per outage: ~5 minutes with the defaults. The suite runs the same
 * drill scaled down (2 s locks): test/queue/redis-outage.test.ts.
 */
import { join } from 'node:path';
import { parseArgs } from 'node:util';

process.env.CANARY_AUDIT_LOG_LEVEL ??= 'error';
const { removeDir, tempDir } = await import('../test/queue/helpers/fixtures.js');
const { runOutageDrill } = await import('../test/queue/helpers/outage-drill.js');

const { values } = parseArgs({
  options: {
    outages: { type: 'string', default: '5,35,120' },
    'lock-s': { type: 'string', default: '30' },
    runs: { type: 'string', default: '2' },
    updates: { type: 'string', default: '2400' },
  },
});
const lockMs = Number(values['lock-s']) * 1000;
const root = tempDir('outage-bench');
const total = { runs: 0, lost: 0, trainedTwice: 0, identical: 0, attemptsSpent: 0 };
try {
  for (const outageS of values.outages.split(',').map(Number)) {
    const report = await runOutageDrill({
      dir: join(root, `outage-${outageS}`),
      lockMs,
      outageMs: outageS * 1000,
      runs: Number(values.runs),
      updates: Number(values.updates),
      stepS: 0.05,
      stopAt: 100,
    });
    console.log(
      `outage ${outageS} s (${((outageS * 1000) / lockMs).toFixed(2)} x the lock): ${line(report)}, attempts spent: ${report.attemptsSpent}`,
    );
    for (const f of report.failures) console.log(`  ${f}`);
    for (const key of Object.keys(total) as (keyof typeof total)[]) total[key] += report[key];
  }
  console.log(`all outages: ${line(total)}`);
} finally {
  removeDir(root);
}
process.exit(total.lost + total.trainedTwice === 0 && total.identical === total.runs ? 0 : 1);

function line(r: { runs: number; lost: number; trainedTwice: number; identical: number }): string {
  return `runs lost: ${r.lost}, trained twice: ${r.trainedTwice}, results identical: ${r.identical}/${r.runs}`;
}
