import { log } from '../log.js';
import { cliCommand, loadAuditSource, pathArg, runAuditLocally, sequentialOfAudit } from '../app/index.js';
import { UserInputError, terminalSafe } from '../errors.js';
import { redisTargetFrom, type AuditStatus, type RedisTarget } from '../queue/index.js';
import { LiveView } from './views/index.js';
import {
  ARTIFACTS_OPTION,
  REDIS_OPTION,
  RETRY_OPTIONS,
  SLOT_OPTIONS,
  TIMING_OPTIONS,
  artifactsFrom,
  tuningFrom,
} from './queue-options.js';
import { runnerFrom, slotsFrom } from './worker-options.js';
import { stringOption, type Command } from './command.js';
import { NO_PIN_OPTION, revisionLines, revisionsJson, warnUnpinned } from './model-revisions.js';
import { jsonLine } from './json-output.js';
import { WANDB_OPTION, wandbFrom } from './tracking-option.js';
import { redisHintArgs } from './redis-hint.js';

/**
 * `canary-audit run GRID`: the whole audit on this machine, no setup: a private redis-server (unless
 * REDIS_URL is set), local workers, live progress, the report at the end.
 */
export const command: Command = {
  name: 'run',
  summary: 'Run a whole audit on this machine: private Redis, local workers, report.',
  usage:
    'GRID [--cpu N|--gpus LIST] [--runner local|docker] [--artifacts DIR] [--redis URL] [--wandb PROJECT] [--no-pin-revisions] [--no-report] [--json]',
  description: `
GRID is a grid YAML file or an audit folder written by \`plan --out\`. Without REDIS_URL/--redis a
private redis-server is started (needs \`redis-server\` on PATH: \`apt-get install redis-server\`),
listening on 127.0.0.1 with a random password, its append-only file in <audit>/redis/; it is
stopped at the end. With a shared Redis, the local workers also take runs of other audits.
Ctrl-C: trainers checkpoint and the runs stay queued; the same command continues the audit.
At the start it prints the command that shows the audit in the dashboard (and in \`status\`); at
the end any control that failed ("control failed (kind): …", e.g. weights_unchanged), the headline
finding, the path of report.html (the report is in <audit>/report/), and last one \`verdict:\` line
per declared comparison (higher, lower, equivalent within the grid's analysis.margin_bits, or
undecided with the runs that would decide it; docs/metrics.md).
A grid with sequential replicates (replicates: {until: decided, min, max}) runs its first min
seeds per cell, then adds one seed at a time to the cells an undecided comparison rests on, and
prints one line per look ("look 2: seed 4 of ≤10 — 2 comparisons undecided, 1 decided
(stopped)"); its record is <audit>/sequential.json, and the same command continues it.
Progress goes to stderr: on a terminal, one line per run and progress bars; with --log-format json,
or when stderr is not a terminal, NDJSON log records only (one per change), never mixed with text.
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
    ...WANDB_OPTION,
    'no-report': { type: 'boolean', description: 'Do not write the report at the end.' },
    'log-format': {
      type: 'string',
      value: 'FORMAT',
      description:
        'stderr as text (human: bars, one line per run) or NDJSON log records (json). Default: human on a terminal, json otherwise.',
    },
    json: {
      type: 'boolean',
      description:
        'No live progress; print {schema_version, audit_id, audit_dir, interrupted, counts, failed, report, verdicts} as JSON at the end (verdicts: one per declared comparison, shaped as in summary.json); schemas/run-output.schema.json.',
    },
  },
  positionals: [1, 1],
  async run(args) {
    const target = redisTargetFrom(stringOption(args, 'redis'), stringOption(args, 'redis-password-file'));
    const slots = slotsFrom(args);
    const runner = runnerFrom(args);
    const tuning = tuningFrom(args);
    const json = Boolean(args.values.json);
    const format = logFormat(stringOption(args, 'log-format'), Boolean(process.stderr.isTTY));
    // Text mode: the lines below are the whole story, so pino's info records (a block per run
    // manifest on a terminal) would only repeat them; an explicit level is respected.
    if (format === 'human' && !process.env.CANARY_AUDIT_LOG_LEVEL) log.level = 'warn';
    // run's own records (the audit, the watch commands, run states) are its output: shown at any level.
    const records = log.child({}, { level: 'info' });
    const say = (line: string, fields: Record<string, unknown> = {}): void => {
      if (format === 'human') process.stderr.write(`${line}\n`);
      else records.info(fields, line);
    };
    const wandbProject = wandbFrom(args);
    const source = await loadAuditSource(
      args.positionals[0] as string,
      artifactsFrom(args),
      { pinRevisions: !args.values['no-pin-revisions'] },
      wandbProject === undefined ? {} : { wandbProject },
    );
    warnUnpinned(source.models);
    for (const line of revisionLines(source.models)) say(line);
    const { auditId, auditDir, runs } = source.input;
    const sequential = await sequentialOfAudit(auditDir);
    // Sequential replicates: the plan holds max seeds per cell; the looks take them as needed.
    const planned = sequential
      ? `${runs.length} run(s) planned (${sequential.min} to ≤${sequential.max} seeds per cell, added while a comparison is undecided)`
      : `${runs.length} run(s)`;
    say(`${auditId} ${source.input.name}: ${planned} in ${auditDir}`, {
      audit: auditId,
      runs: runs.length,
      audit_dir: auditDir,
    });
    if (format === 'human') for (const r of runs) say(`  ${r.runId}  ${r.cellId}`);
    for (const w of watchCommands(
      auditId,
      auditDir,
      target,
      process.env,
      process.cwd(),
      stringOption(args, 'redis-password-file'),
    ))
      say(`${w.label}: ${w.command}`, { audit: auditId, [w.key]: w.command });
    // On its private Redis the audit has exactly these workers: the audit ETA spreads the runs over them.
    const view = json
      ? null
      : format === 'human'
        ? new LiveView(process.stderr, Boolean(process.stderr.isTTY), target ? undefined : slots.length)
        : new ProgressLog(records);

    const controller = new AbortController();
    const onSignal = (signal: NodeJS.Signals) => {
      if (controller.signal.aborted) {
        log.warn({ signal }, 'second signal: exiting now');
        process.exit(130);
      }
      process.stderr.write(
        `\n${signal}: stopping; trainers checkpoint, runs stay queued (run the same command to continue)\n`,
      );
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
        onLook: (line) => say(line, { audit: auditId, look: line }),
      });
      const finished = result.status?.runs ?? [];
      const failed = finished.filter((r) => r.state === 'failed' || r.state === 'cancelled');
      if (json) {
        process.stdout.write(
          jsonLine('run', {
            audit_id: result.auditId,
            audit_dir: result.auditDir,
            interrupted: result.interrupted,
            counts: result.status?.counts ?? {},
            failed: failed.map((r) => ({ run_id: r.run_id, cell_id: r.cell_id, state: r.state, reason: r.failure })),
            report: result.reportFiles,
            verdicts: result.comparisons,
            ...(result.controlWarnings.length > 0 ? { warnings: result.controlWarnings } : {}),
            models: revisionsJson(source.models),
          }),
        );
      } else {
        const done = finished.filter((r) => r.state === 'completed').length;
        process.stdout.write(
          `${result.auditId}: ${done}/${finished.length} runs completed${failed.length ? `, ${failed.length} failed or cancelled` : ''}${result.interrupted ? ' (interrupted)' : ''}\n`,
        );
        for (const r of failed)
          process.stdout.write(terminalSafe(`  ${r.run_id} ${r.cell_id} ${r.state}: ${r.failure ?? ''}\n`));
        // The finding first, then where the report is; the other files sit beside it.
        const html = (result.reportFiles ?? []).find((f) => f.endsWith('report.html'));
        // Controls that failed come with the finding: it rests on them.
        for (const w of result.controlWarnings)
          process.stdout.write(terminalSafe(`control failed (${w.kind}): ${w.message}\n`));
        if (result.headline) process.stdout.write(`finding: ${result.headline}\n`);
        if (html) process.stdout.write(`report: ${html}\n`);
        else if (result.interrupted)
          process.stdout.write(`continue with the same command: ${cliCommand()} run ${pathArg(auditDir)}\n`);
        // Last: the verdict of each declared comparison, in a sentence.
        for (const v of result.verdicts) process.stdout.write(terminalSafe(`verdict: ${v}\n`));
      }
      return result.interrupted || failed.length > 0 ? 1 : 0;
    } finally {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    }
  },
};

function logFormat(flag: string | undefined, tty: boolean): 'human' | 'json' {
  if (flag === undefined) return tty ? 'human' : 'json';
  const f = flag.toLowerCase();
  if (f !== 'human' && f !== 'json')
    throw new UserInputError(`--log-format must be human or json, got ${JSON.stringify(flag)}`, {
      field: '--log-format',
      code: 'E_BAD_FLAG',
    });
  return f;
}

/** The commands that show this audit while it runs (and after: the dashboard reads its files). */
export function watchCommands(
  _auditId: string,
  auditDir: string,
  target: RedisTarget | undefined,
  env: NodeJS.ProcessEnv = process.env,
  cwd: string = process.cwd(),
  passwordFile?: string,
): { key: string; label: string; command: string }[] {
  // Each runs as printed from this folder: the CLI as it is reachable here (cli/invocation.ts).
  const cli = cliCommand(env, cwd);
  const dir = pathArg(auditDir, cwd);
  // A shared Redis from REDIS_URL is found again by the same variable; one from --redis is named,
  // its password by where it came from (never a *** placeholder).
  const redis = redisHintArgs(target, passwordFile, env);
  return [
    { key: 'dashboard', label: 'watch in the dashboard', command: `${cli} dashboard --audit ${dir}${redis}` },
    { key: 'status', label: 'watch in the terminal', command: `${cli} status --audit ${dir} --watch${redis}` },
  ];
}

/** Progress as NDJSON log records: one per run whose state or phase changed. */
class ProgressLog {
  private readonly seen = new Map<string, string>();

  constructor(private readonly records: typeof log) {}

  show(snapshot: AuditStatus[]): void {
    for (const audit of snapshot) {
      for (const run of audit.runs) {
        const p = run.progress;
        const key = `${run.state}|${p?.phase ?? ''}|${p?.eval?.phase ?? ''}`;
        if (this.seen.get(run.run_id) === key) continue;
        this.seen.set(run.run_id, key);
        // waiting_for: the run building the base this one waits for (phase waiting_base).
        this.records.info(
          {
            audit: audit.audit_id,
            run: run.run_id,
            cell: run.cell_id,
            state: run.state,
            phase: p?.phase ?? null,
            update: p?.update ?? null,
            total: p?.total ?? null,
            ...(p?.waiting ? { waiting_for: p.waiting.run_id } : {}),
            failure: run.failure,
          },
          'run state',
        );
      }
    }
  }
}
