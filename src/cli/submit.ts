import { cliCommand, pathArg, shellWord, submitSource } from '../app/index.js';
import { requireRedisTarget } from '../queue/index.js';
import { ARTIFACTS_OPTION, REDIS_OPTION, RETRY_OPTIONS, artifactsFrom, tuningFrom } from './queue-options.js';
import { stringOption, type Command } from './command.js';
import { NO_PIN_OPTION, revisionLines, revisionsJson, warnUnpinned } from './model-revisions.js';
import { jsonLine } from './json-output.js';
import { WANDB_OPTION, wandbFrom } from './tracking-option.js';
import { redisHintArgs } from './redis-hint.js';

/**
 * `canary-audit submit GRID`: expand the grid, write the manifests into the artifact root and queue
 * the audit as one BullMQ flow (audit parent + one job per run). Job ids are content hashes, so
 * submitting the same grid again adds nothing.
 */
export const command: Command = {
  name: 'submit',
  summary: 'Expand a grid and queue one fine-tuning job per run on Redis.',
  usage:
    'GRID [--redis URL] [--artifacts DIR] [--attempts N] [--backoff-s S] [--wandb PROJECT] [--no-pin-revisions] [--json]',
  description: `
GRID is a grid YAML file, or an audit folder already written by \`plan --out\` (holding audit.json).
Manifests go to <artifacts>/audits/<audit_id>/runs/<run_id>/; workers on any host that sees the
same artifact root run them (\`canary-audit worker\`). An audit already in the queue is left as it
is: nothing is added (to run a cancelled audit again, \`cancel AUDIT --purge\` first).
Hub models are pinned to commit shas as \`plan\` does (see \`canary-audit plan --help\`).
A grid with sequential replicates (replicates: {until: decided}) queues its first look only
(the first min seeds per cell) and prints the command that continues it: \`run AUDIT_DIR --redis
URL\` reads each look when its runs end and queues the next seed where a comparison is undecided.
Exit codes: 0 queued (or already queued), 1 Redis unreachable, 2 bad grid or flags.`,
  options: {
    ...REDIS_OPTION,
    ...ARTIFACTS_OPTION,
    ...RETRY_OPTIONS,
    ...NO_PIN_OPTION,
    ...WANDB_OPTION,
    json: {
      type: 'boolean',
      description:
        'Print {schema_version, audit_id, added, state, runs, audit_dir, redis, models} as JSON on stdout; schemas/submit-output.schema.json.',
    },
  },
  positionals: [1, 1],
  async run(args) {
    const target = requireRedisTarget(stringOption(args, 'redis'), 'submit', stringOption(args, 'redis-password-file'));
    const tuning = tuningFrom(args);
    const wandbProject = wandbFrom(args);
    const { source, outcome, sequential } = await submitSource(
      args.positionals[0] as string,
      artifactsFrom(args),
      target,
      tuning,
      { pinRevisions: !args.values['no-pin-revisions'] },
      wandbProject === undefined ? {} : { wandbProject },
    );
    warnUnpinned(source.models);
    if (args.values.json) {
      process.stdout.write(
        jsonLine('submit', {
          audit_id: outcome.auditId,
          added: outcome.added,
          state: outcome.existingState ?? 'queued',
          runs: outcome.runs,
          audit_dir: source.input.auditDir,
          redis: target.redacted,
          models: revisionsJson(source.models),
        }),
      );
      return 0;
    }
    for (const line of revisionLines(source.models)) process.stdout.write(`${line}\n`);
    if (outcome.added) {
      process.stdout.write(
        `queued ${outcome.auditId} (${outcome.runs} run${outcome.runs === 1 ? '' : 's'}) on ${target.redacted}\n` +
          `  manifests: ${source.input.auditDir}\n  watch: ${cliCommand()} status ${outcome.auditId} --watch${redisHintArgs(target, stringOption(args, 'redis-password-file'))}\n`,
      );
    } else {
      process.stdout.write(`${outcome.auditId} is already in the queue (${outcome.existingState}); nothing added\n`);
    }
    if (sequential) {
      const redis = process.env.REDIS_URL ? '' : ` --redis ${shellWord(target.redacted)}`;
      process.stdout.write(
        `sequential replicates: only the first look's runs are queued; continue the looks (read each look, queue the next seeds) with: ${cliCommand()} run ${pathArg(source.input.auditDir)}${redis}\n`,
      );
    }
    return 0;
  },
};
