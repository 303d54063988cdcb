import { terminalSafe } from '../errors.js';
import { log } from '../log.js';
import { loadAuditSource, runAuditLocally } from '../app/index.js';
import { LiveView, redisTargetFrom } from '../queue/index.js';
import { ARTIFACTS_OPTION, REDIS_OPTION, RETRY_OPTIONS, SLOT_OPTIONS, TIMING_OPTIONS, artifactsFrom, runnerFrom, slotsFrom, tuningFrom } from './queue-options.js';
import { stringOption, type Command } from './command.js';
import { NO_PIN_OPTION, revisionLines, revisionsJson, warnUnpinned } from './model-revisions.js';
import { jsonLine } from './json-output.js';

/**
 * `canary-audit run GRID`: the whole audit on this machine, no setup: a private redis-server (unless
 * REDIS_URL is set), local workers, live progress, the report at the end.
 */
export const command: Command = {
  name: 'run',
  summary: 'Run a whole audit on this machine: private Redis, local workers, report.',
  usage: 'GRID [--cpu N|--gpus LIST] [--runner local|docker] [--artifacts DIR] [--redis URL] [--no-pin-revisions] [--no-report] [--json]',
  description: `
GRID is a grid YAML file or an audit folder written by \`plan --out\`. Without REDIS_URL/--redis a
private redis-server is started (needs \`redis-server\` on PATH: \`apt-get install redis-server\`),
listening on 127.0.0.1 with a random password, its append-only file in <audit>/redis/; it is
stopped at the end. With a shared Redis, the local workers also take runs of other audits.
Ctrl-C: trainers checkpoint and the runs stay queued; the same command continues the audit.
Progress goes to stderr (bars on a terminal, changes otherwise); the report to <audit>/report/.
Hub models are pinned to commit shas as \`plan\` does (see \`canary-audit plan --help\`).
Exit codes: 0 every run finished, 1 some run failed, was cancelled, or the audit was interrupted,
2 bad grid or flags.`,
  options: {
    ...SLOT_OPTIONS,
    ...ARTIFACTS_OPTION,
    ...REDIS_OPTION,
    ...RETRY_OPTIONS,
    ...TIMING_OPTIONS,
    ...NO_PIN_OPTION,
    'no-report': { type: 'boolean', description: 'Do not write the report at the end.' },
    json: { type: 'boolean', description: 'No live progress; print {schema_version, audit_id, audit_dir, interrupted, counts, failed, report} as JSON at the end; schemas/run-output.schema.json.' },
  },
  positionals: [1, 1],
  async run(args) {
    const target = redisTargetFrom(stringOption(args, 'redis'), stringOption(args, 'redis-password-file'));
    const slots = slotsFrom(args);
    const runner = runnerFrom(args);
    const tuning = tuningFrom(args);
    const json = Boolean(args.values.json);
    const source = await loadAuditSource(args.positionals[0] as string, artifactsFrom(args), { pinRevisions: !args.values['no-pin-revisions'] });
    warnUnpinned(source.models);
    if (!json) for (const line of revisionLines(source.models)) process.stderr.write(`${line}\n`);
    const view = json ? null : new LiveView(process.stderr);
    // Info logs would tear the bars redrawn on the terminal; an explicit level is respected.
    if (view && process.stderr.isTTY && !process.env.CANARY_AUDIT_LOG_LEVEL) log.level = 'warn';

    const controller = new AbortController();
    const onSignal = (signal: NodeJS.Signals) => {
      if (controller.signal.aborted) {
        log.warn({ signal }, 'second signal: exiting now');
        process.exit(130);
      }
      process.stderr.write(`\n${signal}: stopping; trainers checkpoint, runs stay queued (run the same command to continue)\n`);
      controller.abort();
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
    try {
      const result = await runAuditLocally({
        source,
        ...(target ? { target } : {}),
        slots,
        runner,
        tuning,
        view,
        report: !args.values['no-report'],
        signal: controller.signal,
      });
      const runs = result.status?.runs ?? [];
      const failed = runs.filter((r) => r.state === 'failed' || r.state === 'cancelled');
      if (json) {
        process.stdout.write(
          jsonLine('run', {
            audit_id: result.auditId,
            audit_dir: result.auditDir,
            interrupted: result.interrupted,
            counts: result.status?.counts ?? {},
            failed: failed.map((r) => ({ run_id: r.run_id, cell_id: r.cell_id, state: r.state, reason: r.failure })),
            report: result.reportFiles,
            models: revisionsJson(source.models),
          }),
        );
      } else {
        const done = runs.filter((r) => r.state === 'completed').length;
        process.stdout.write(`${result.auditId}: ${done}/${runs.length} runs completed${failed.length ? `, ${failed.length} failed or cancelled` : ''}${result.interrupted ? ' (interrupted)' : ''}\n`);
        for (const r of failed) process.stdout.write(terminalSafe(`  ${r.run_id} ${r.cell_id} ${r.state}: ${r.failure ?? ''}\n`));
        for (const file of result.reportFiles ?? []) process.stdout.write(`wrote ${file}\n`);
      }
      return result.interrupted || failed.length > 0 ? 1 : 0;
    } finally {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    }
  },
};
