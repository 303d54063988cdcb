import {
  assertRedisReachable,
  auditDone,
  collectStatus,
  openRedis,
  queueConnection,
  readFleet,
  readStoppedWorkers,
  throughputByHost,
  requireRedisTarget,
  privateRedisTarget,
  redisTargetFrom,
} from '../queue/index.js';
import { LiveView, renderFleet, renderBars, renderPlain } from './views/index.js';
import { existsSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { readAuditIndex } from '../contracts/index.js';
// From their modules, not app/index.js: status would otherwise load plan, submit and run (seconds of start-up).
import { auditsOnDisk, notQueuedLines, notQueuedReason } from '../app/disk-audits.js';
import { cliCommand, pathArg } from '../app/invocation.js';
import { withReportVerdicts } from '../app/report-verdicts.js';
import { CanaryAuditError, UserInputError, terminalSafe } from '../errors.js';
import { ARTIFACTS_OPTION, REDIS_OPTION, artifactsFrom } from './queue-options.js';
import { intOption, stringOption, type Command } from './command.js';
import { jsonLine } from './json-output.js';

/**
 * `canary-audit status [AUDIT]`: what is waiting, running (with progress), finished and failed, from
 * Redis, on any host. --json gives the same snapshot for scripts and dashboards.
 */
export const command: Command = {
  name: 'status',
  summary: 'Show audits and runs in the queue: state, progress, ETA, failures.',
  usage: '[AUDIT] [--watch] [--interval S] [--json] [--workers] [--redis URL] [--artifacts DIR]',
  description: `
Per audit: its state (queued, running, finished, cancelling, cancelled) and runs per state. Per run:
state, update/total, loss, rows/s, ETA, host and GPU, attempt, and the failure reason.
--workers lists the worker processes instead: idle, busy or lost (no heartbeat), what each slot
runs, GPU utilisation and memory (nvidia-smi), rows/s per host.
On a terminal runs get progress bars; otherwise plain lines. With --watch the view refreshes every
--interval seconds (until AUDIT, when given, is finished); without a terminal only changes are
printed, and with --json one snapshot per line (NDJSON).
Audits under the artifact root (--artifacts) that the queue does not hold (Redis lost its data, or
they were purged) are listed with the command that submits them again (--json: not_queued).
Exit codes: 0 ok, 1 Redis unreachable, 2 unknown audit or bad flags.`,
  options: {
    ...REDIS_OPTION,
    ...ARTIFACTS_OPTION,
    watch: {
      type: 'boolean',
      short: 'w',
      description: 'Keep refreshing until interrupted (or until AUDIT is finished).',
    },
    interval: { type: 'string', value: 'S', description: 'Seconds between refreshes with --watch. Default 2.' },
    json: {
      type: 'boolean',
      description:
        'Print {schema_version, audits:[...]} as JSON (one line per refresh with --watch, with time); a finished audit whose folder holds a report carries its verdicts (as in summary.json); schemas/status-output.schema.json. With --workers: {schema_version, workers, rows_per_s_by_host}; schemas/fleet-output.schema.json.',
    },
    workers: {
      type: 'boolean',
      description: 'Show the fleet: workers (idle, busy, lost), their GPUs and rows/s per host.',
    },
    audit: {
      type: 'string',
      value: 'DIR',
      description:
        'The audit in this folder; without --redis/REDIS_URL, on the private Redis `canary-audit run` started for it (DIR/redis).',
    },
  },
  positionals: [0, 1],
  async run(args) {
    const auditDirFlag = stringOption(args, 'audit');
    const auditDir = auditDirFlag === undefined ? undefined : resolve(auditDirFlag);
    if (auditDir !== undefined && !existsSync(join(auditDir, 'audit.json'))) {
      throw new UserInputError(`${auditDir} holds no audit.json; pass an audit folder (artifacts/audits/<audit-id>)`, {
        field: '--audit',
        code: 'E_NO_AUDIT',
      });
    }
    const own =
      auditDir !== undefined && !redisTargetFrom(stringOption(args, 'redis'))
        ? privateRedisTarget(join(auditDir, 'redis'))
        : null;
    if (!own && !redisTargetFrom(stringOption(args, 'redis'), stringOption(args, 'redis-password-file'))) {
      const why =
        auditDir !== undefined
          ? `${auditDir} has no private Redis (\`canary-audit run\` did not start this audit): pass the queue it was submitted to with --redis URL or REDIS_URL, or read it from its files: \`${cliCommand()} dashboard --audit ${pathArg(auditDir)}\``
          : await fromFiles(artifactsFrom(args));
      throw new UserInputError(`no Redis given: set REDIS_URL or pass --redis redis://host:6379; ${why}`, {
        code: 'E_NO_REDIS',
      });
    }
    const target =
      own ?? requireRedisTarget(stringOption(args, 'redis'), 'status', stringOption(args, 'redis-password-file'));
    const auditId =
      args.positionals[0] ??
      (auditDir !== undefined ? (await readAuditIndex(join(auditDir, 'audit.json'))).id : undefined);
    const intervalMs = intOption(args, 'interval', 2, 1) * 1000;
    const json = Boolean(args.values.json);
    try {
      await assertRedisReachable(target);
    } catch (error) {
      if (!own || auditDir === undefined) {
        if (!(error instanceof CanaryAuditError) || error.code !== 'E_REDIS_UNREACHABLE') throw error;
        throw new CanaryAuditError(error.code, `${error.message}; ${await fromFiles(artifactsFrom(args))}`, {
          cause: error,
        });
      }
      const report = join(auditDir, 'report', 'report.html');
      throw new CanaryAuditError(
        'E_REDIS_UNREACHABLE',
        `the private Redis of ${auditDir} is not running (\`canary-audit run\` stops it when the audit ends, or was interrupted)${existsSync(report) ? `; its report: ${report}` : ''}; \`${cliCommand()} dashboard --audit ${pathArg(auditDir)}\` shows the audit from its files, \`${cliCommand()} run ${pathArg(auditDir)}\` continues it`,
      );
    }
    const conn = queueConnection(target);
    const onDisk = await auditsOnDisk(artifactsFrom(args));
    const snapshot = () =>
      collectStatus(conn, auditId).catch((error: unknown) => {
        const disk = onDisk.find((a) => a.auditId === auditId);
        if (!(error instanceof UserInputError) || !disk) throw error;
        throw new UserInputError(
          `no audit ${auditId} on this Redis (${target.redacted}); it is on disk at ${disk.dir}: ${notQueuedReason(disk)}`,
          { code: error.code },
        );
      });

    // A finished audit with a report on this host: --json carries that report's verdicts.
    const ownId = auditDir !== undefined ? auditId : undefined;
    const dirOf = (id: string): string | undefined =>
      id === ownId ? auditDir : onDisk.find((a) => a.auditId === id)?.dir;

    if (args.values.workers) {
      const client = openRedis(conn);
      try {
        const [workers, stopped, audits] = await Promise.all([
          readFleet(client, conn.prefix),
          readStoppedWorkers(client, conn.prefix),
          snapshot(),
        ]);
        const throughput = throughputByHost(audits.flatMap((a) => a.runs));
        process.stdout.write(
          json
            ? jsonLine('fleet', { workers, rows_per_s_by_host: Object.fromEntries(throughput) })
            : terminalSafe(renderFleet(workers, throughput, stopped)),
        );
      } finally {
        client.disconnect();
      }
      return 0;
    }

    if (!args.values.watch) {
      const audits = await snapshot();
      const queued = new Set(audits.map((a) => a.audit_id));
      const missing = auditId === undefined ? onDisk.filter((a) => !queued.has(a.auditId)) : [];
      if (json) {
        process.stdout.write(
          jsonLine('status', {
            audits: await withReportVerdicts(audits, dirOf),
            not_queued: missing.map((a) => ({ audit_id: a.auditId, name: a.name, dir: a.dir })),
          }),
        );
        return 0;
      }
      // User strings (grid names, cell labels, trainer messages) reach the terminal escaped.
      process.stdout.write(
        terminalSafe(process.stdout.isTTY ? renderBars(audits, process.stdout.columns ?? 100) : renderPlain(audits)),
      );
      for (const line of notQueuedLines(missing, queued, target.redacted))
        process.stdout.write(`${terminalSafe(line)}\n`);
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
        if (json)
          process.stdout.write(
            jsonLine('status', { time: new Date().toISOString(), audits: await withReportVerdicts(audits, dirOf) }),
          );
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

/**
 * Without a queue, what reads an audit from its folder: `status --audit DIR` (an audit `run` is
 * running, on its private Redis) and `dashboard --audit DIR`, named with the newest audit under the
 * artifact root when there is one, so the command runs as printed.
 */
async function fromFiles(artifactsDir: string): Promise<string> {
  const audits = await auditsOnDisk(artifactsDir);
  const newest = audits
    .map((a) => ({ a, at: statSync(join(a.dir, 'audit.json')).mtimeMs }))
    .sort((x, y) => y.at - x.at)[0]?.a;
  const cli = cliCommand();
  if (!newest)
    return `for an audit \`canary-audit run\` started, pass its folder: \`${cli} status --audit DIR\` (DIR: <artifacts>/audits/<audit-id>; none under ${artifactsDir})`;
  const dir = pathArg(newest.dir);
  return `for an audit \`canary-audit run\` started, pass its folder: \`${cli} status --audit ${dir}\` (the newest under ${artifactsDir}, ${newest.name}), or \`${cli} dashboard --audit ${dir}\` to read it from its files`;
}
