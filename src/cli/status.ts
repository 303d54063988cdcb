import {
  LiveView,
  assertRedisReachable,
  auditDone,
  collectStatus,
  openRedis,
  queueConnection,
  readFleet,
  renderFleet,
  throughputByHost,
  renderBars,
  renderPlain,
  requireRedisTarget,
} from '../queue/index.js';
import { REDIS_OPTION } from './queue-options.js';
import { intOption, stringOption, type Command } from './command.js';

/**
 * `canary-audit status [AUDIT]`: what is waiting, running (with progress), finished and failed, from
 * Redis, on any host. --json gives the same snapshot for scripts and dashboards.
 */
export const command: Command = {
  name: 'status',
  summary: 'Show audits and runs in the queue: state, progress, ETA, failures.',
  usage: '[AUDIT] [--watch] [--interval S] [--json] [--workers] [--redis URL]',
  description: `
Per audit: its state (queued, running, finished, cancelling, cancelled) and runs per state. Per run:
state, update/total, loss, rows/s, ETA, host and GPU, attempt, and the failure reason.
--workers lists the worker processes instead: idle, busy or lost (no heartbeat), what each slot
runs, GPU utilisation and memory (nvidia-smi), rows/s per host.
On a terminal runs get progress bars; otherwise plain lines. With --watch the view refreshes every
--interval seconds (until AUDIT, when given, is finished); without a terminal only changes are
printed, and with --json one snapshot per line (NDJSON).
Exit codes: 0 ok, 1 Redis unreachable, 2 unknown audit or bad flags.`,
  options: {
    ...REDIS_OPTION,
    watch: { type: 'boolean', short: 'w', description: 'Keep refreshing until interrupted (or until AUDIT is finished).' },
    interval: { type: 'string', value: 'S', description: 'Seconds between refreshes with --watch. Default 2.' },
    json: { type: 'boolean', description: 'Print {audits:[...]} as JSON (one line per refresh with --watch).' },
    workers: { type: 'boolean', description: 'Show the fleet: workers (idle, busy, lost), their GPUs and rows/s per host.' },
  },
  positionals: [0, 1],
  async run(args) {
    const target = requireRedisTarget(stringOption(args, 'redis'), 'status');
    const auditId = args.positionals[0];
    const intervalMs = intOption(args, 'interval', 2, 1) * 1000;
    const json = Boolean(args.values.json);
    await assertRedisReachable(target);
    const conn = queueConnection(target);
    const snapshot = () => collectStatus(conn, auditId);

    if (args.values.workers) {
      const client = openRedis(conn);
      try {
        const [workers, audits] = await Promise.all([readFleet(client, conn.prefix), snapshot()]);
        const throughput = throughputByHost(audits.flatMap((a) => a.runs));
        process.stdout.write(json ? `${JSON.stringify({ workers, rows_per_s_by_host: Object.fromEntries(throughput) })}\n` : renderFleet(workers, throughput));
      } finally {
        client.disconnect();
      }
      return 0;
    }

    if (!args.values.watch) {
      const audits = await snapshot();
      if (json) process.stdout.write(`${JSON.stringify({ audits })}\n`);
      else process.stdout.write(process.stdout.isTTY ? renderBars(audits, process.stdout.columns ?? 100) : renderPlain(audits));
      return 0;
    }

    const view = new LiveView(process.stdout);
    let stop = false;
    const onSignal = () => {
      stop = true;
    };
    process.once('SIGINT', onSignal);
    process.once('SIGTERM', onSignal);
    try {
      while (!stop) {
        const audits = await snapshot();
        if (json) process.stdout.write(`${JSON.stringify({ time: new Date().toISOString(), audits })}\n`);
        else view.show(audits);
        if (auditId !== undefined && audits.every(auditDone)) break;
        await new Promise((resolve) => setTimeout(resolve, intervalMs));
      }
    } finally {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    }
    return 0;
  },
};
