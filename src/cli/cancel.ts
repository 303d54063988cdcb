import {
  assertRedisReachable,
  cancelAudit,
  purgeAudit,
  queueConnection,
  requireRedisTarget,
  resolveTuning,
  waitStopped,
} from '../queue/index.js';
import { SHUTDOWN_MARGIN_MS } from '../worker/index.js';
import { ARTIFACTS_OPTION, REDIS_OPTION, artifactsFrom } from './queue-options.js';
import { stringOption, type Command } from './command.js';
import { jsonLine } from './json-output.js';

/**
 * `canary-audit cancel AUDIT`: waiting runs are removed, running trainers are stopped on whatever
 * host runs them (a Redis message every worker listens to, plus a flag each run checks), and the
 * cancellation is recorded in Redis and in each run's output/failure.json.
 */
export const command: Command = {
  name: 'cancel',
  summary: 'Cancel an audit: drop waiting runs, stop running trainers.',
  usage: 'AUDIT [--no-wait] [--purge] [--json] [--redis URL] [--artifacts DIR]',
  description: `
Running trainers get SIGTERM, write a checkpoint and exit; their runs fail with kind "cancelled".
By default the command waits until they have stopped (at most the workers' stop grace period plus
${SHUTDOWN_MARGIN_MS / 1000} s). Finished runs and their results are kept. --purge then removes the audit and
its runs from Redis (files stay), so the same grid can be submitted again.
Exit codes: 0 cancelled, 1 Redis unreachable or trainers still running after the wait, 2 unknown audit.`,
  options: {
    ...REDIS_OPTION,
    ...ARTIFACTS_OPTION,
    'no-wait': {
      type: 'boolean',
      description: 'Return once the stop is requested, without waiting for trainers to exit.',
    },
    purge: {
      type: 'boolean',
      description: 'After stopping, remove the audit and its runs from Redis (artifacts stay on disk).',
    },
    json: {
      type: 'boolean',
      description:
        'Print {schema_version, audit_id, cancelled_at, removed, stopping, finished, still_running, purged} as JSON; schemas/cancel-output.schema.json.',
    },
  },
  positionals: [1, 1],
  async run(args) {
    const target = requireRedisTarget(stringOption(args, 'redis'), 'cancel', stringOption(args, 'redis-password-file'));
    const auditId = args.positionals[0] as string;
    await assertRedisReachable(target);
    const conn = queueConnection(target);
    const outcome = await cancelAudit(conn, auditId, artifactsFrom(args));
    let stillRunning: string[] = [];
    if (!args.values['no-wait'] && outcome.stopping.length > 0) {
      if (!args.values.json)
        process.stderr.write(`waiting for ${outcome.stopping.length} trainer(s) to checkpoint and exit...\n`);
      stillRunning = await waitStopped(conn, outcome.stopping, resolveTuning().stopGraceMs + SHUTDOWN_MARGIN_MS);
    }
    // Purging a run whose trainer still writes would orphan it: purge only once all stopped.
    const unstopped = args.values['no-wait'] ? outcome.stopping : stillRunning;
    let purged = false;
    if (args.values.purge) {
      if (unstopped.length > 0) {
        process.stderr.write(
          'canary-audit: not purging: trainers are still running; run cancel --purge again once they stopped\n',
        );
      } else {
        await purgeAudit(conn, auditId);
        purged = true;
      }
    }
    if (args.values.json) {
      process.stdout.write(
        jsonLine('cancel', {
          audit_id: outcome.auditId,
          cancelled_at: outcome.cancelledAt,
          removed: outcome.removed,
          stopping: outcome.stopping,
          finished: outcome.finished,
          still_running: stillRunning,
          purged,
        }),
      );
    } else {
      process.stdout.write(
        `cancelled ${outcome.auditId} at ${outcome.cancelledAt}: ${outcome.removed.length} waiting run(s) removed, ` +
          `${outcome.stopping.length} running run(s) ${args.values['no-wait'] ? 'told to stop' : 'stopped'}, ${outcome.finished.length} already finished\n`,
      );
      if (stillRunning.length > 0) process.stdout.write(`still running after the wait: ${stillRunning.join(', ')}\n`);
      if (purged) process.stdout.write(`removed ${outcome.auditId} and its runs from the queue (artifacts kept)\n`);
    }
    return stillRunning.length > 0 ? 1 : 0;
  },
};
