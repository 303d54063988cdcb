/**
 * The partition drill at lab shape: a Redis host and worker hosts in network namespaces this script
 * makes (root and `ip` needed; everything it made is removed at the end, on failure too), the real
 * `worker` CLI on each host with the stand-in trainer. One host loses its link for --cut-ms, then
 * every host loses Redis for --outage-ms; the script prints how many runs completed, completed twice,
 * had an update trained twice, equal an undisturbed run, and how many of the cut host's runs other
 * hosts had taken by the end of the cut.
 *
 *   npx tsx bench/partition.ts                       # 8 hosts x 8 slots (64 workers), 96 runs
 *   npx tsx bench/partition.ts --hosts 4 --slots 2 --runs 6 --updates 600 --outage-ms 120000
 *       # the shape of test/queue/partition.test.ts: every host cut from Redis for 2 minutes
 *   npx tsx bench/partition.ts --help
 *
 * Options (defaults): --hosts 8, --slots 8 (CPU slots per host), --runs 96, --updates 120 (per run,
 * plus the run's index), --step-s 0.05 (seconds per update), --lock-ms 2000, --cut-ms 10000,
 * --outage-ms 6000 (every host cut from Redis; runs must last past the first cut to be training
 * then: the report counts those that were). `npm run build` first: the hosts run dist/cli/main.js. --record NAME also writes
 * the output as the benchmark record bench/results/<date>-NAME.md (see bench/records.ts).
 */
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { docHelp } from './help.js';

const HELP = docHelp(import.meta.url);
const { values } = parseArgs({
  options: {
    hosts: { type: 'string', default: '8' },
    slots: { type: 'string', default: '8' },
    runs: { type: 'string', default: '96' },
    updates: { type: 'string', default: '120' },
    'step-s': { type: 'string', default: '0.05' },
    'lock-ms': { type: 'string', default: '2000' },
    'cut-ms': { type: 'string', default: '10000' },
    'outage-ms': { type: 'string', default: '6000' },
    record: { type: 'string' },
    help: { type: 'boolean', default: false },
  },
});
if (values.help) {
  process.stdout.write(HELP);
  process.exit(0);
}
const num = (name: keyof typeof values): number => {
  const v = Number(values[name]);
  if (!Number.isFinite(v) || v <= 0) {
    process.stderr.write(
      `bench/partition.ts: --${name} must be a number > 0 (got ${JSON.stringify(values[name])}); see --help\n`,
    );
    process.exit(2);
  }
  return v;
};
const options = {
  hosts: num('hosts'),
  slots: num('slots'),
  runs: num('runs'),
  updates: num('updates'),
  stepS: num('step-s'),
  lockMs: num('lock-ms'),
  cutMs: num('cut-ms'),
  outageMs: num('outage-ms'),
};
if (options.hosts > 200) {
  process.stderr.write('bench/partition.ts: --hosts is at most 200 (one 10.231.<i>.0/30 per host)\n');
  process.exit(2);
}
if (values.record !== undefined) {
  const { recordStdout } = await import('./records.js');
  recordStdout(values.record, 'Partition drill: a host cut off, then Redis cut from every host');
}
process.env.CANARY_AUDIT_LOG_LEVEL ??= 'warn';
const { removeDir, tempDir } = await import('../test/queue/helpers/fixtures.js');
const { runPartitionDrill } = await import('../test/queue/helpers/partition-drill.js');
const root = tempDir('bench-partition');
try {
  const t0 = performance.now();
  const report = await runPartitionDrill({ dir: join(root, 'drill'), ...options });
  const s = ((performance.now() - t0) / 1000).toFixed(0);
  process.stdout.write(
    `partition drill: ${options.hosts} hosts x ${options.slots} slots, ${options.runs} runs of ${options.updates}+ updates at ${options.stepS} s, lock ${options.lockMs} ms; one host cut ${options.cutMs} ms, then all hosts ${options.outageMs} ms; ${s} s\n` +
      `  completed ${report.completed}/${report.runs}, completed twice ${report.completedTwice}, an update trained twice ${report.trainedTwice}, identical to an undisturbed run ${report.identical}\n` +
      `  takeovers of a run whose lock expired ${report.stalls} (at most ${report.maxStalls} for one run)\n` +
      `  the cut host's runs ${report.cut}, taken by other hosts within the cut ${report.handedOver}; its trainers alive after the cut ${report.cutTrainersAlive}\n` +
      `  runs training when every host lost Redis ${report.outageRuns}; their trainers alive at the end of the outage ${report.outageTrainersAlive}\n` +
      `  runs completed on each host: ${(report.completedOnHost ?? []).join(', ')}\n` +
      `  seconds each worker took to exit after one SIGTERM: ${(report.workerExitS ?? []).map((s) => (s === null ? 'did not exit' : s)).join(', ')}\n` +
      `  their stop lines: ${(report.workerStops ?? []).join(' | ')}\n` +
      (report.failures.length ? `  failures: ${report.failures.join('; ')}\n` : '') +
      (report.doubles.length ? `  trained twice: ${report.doubles.join('\n    ')}\n` : ''),
  );
} finally {
  removeDir(root);
}
