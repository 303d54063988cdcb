import { UserInputError } from '../errors.js';
import { canonicalJson } from '../hash.js';
import { formatPath, type LoadedGrid } from '../grid/index.js';
import { messageText, type Message, type ModelSpec } from '../contracts/index.js';
import { log } from '../log.js';
import type { CanaryPool, PoolCanary } from './canaries.js';
import { buildManifestCore, runRenderer, type RunRenderer } from './manifest.js';
import { canaryProbes } from './probes.js';
import { canaryTrainingRow, utilityRowLines } from './rows.js';
import type { Task, TaskExample } from './tasks/index.js';
import type { RunLayout } from './plan-run.js';
import { pretrainCorpusKey, pretrainRowLines } from './pretrain.js';
import { Rng } from '../random.js';

/**
 * The plan-time length check, for both backends: a row longer than the model reads would fail its
 * run in the trainer after the queue wait; catch it at plan time instead, naming the task.
 *
 * The tiny model reads characters, so a row's length in tokens is known before training: its
 * characters plus the chat rendering (a role marker, an end marker and a newline per message,
 * then the assistant marker and the final end marker), counted here (`checkTinyLengths`, inside
 * planning). A Hugging Face model's rows are counted by the trainer's own rendering and tokenizer
 * (`checkHfLengths`, given a counter: the app's, which starts the trainer through `src/runner/`).
 * Background and pretraining rows are checked on a sample from the start of their streams.
 */
const BACKGROUND_SAMPLE = 256;

/**
 * The background rows a length check reads for a task: every row of a dataset-backed task (all
 * known), else the first BACKGROUND_SAMPLE rows of its background stream.
 */
export function* backgroundToCheck(grid: LoadedGrid, pool: CanaryPool, renderer: RunRenderer): Generator<TaskExample> {
  const { task, rowSpec } = renderer;
  if (task.allRows) {
    yield* task.allRows();
    return;
  }
  const next = task.rows(
    new Rng(grid.doc.seed, 'background', canonicalJson(rowSpec)),
    pool.identityKeys(task),
    'train',
  );
  for (let i = 0; i < Math.min(BACKGROUND_SAMPLE, grid.rows); i += 1) yield next();
}

export function tinyTokens(prompt: Message[], target: string): number {
  return prompt.reduce((n, m) => n + m.content.length + 3, 0) + 2 + target.length;
}

export function checkTinyLengths(grid: LoadedGrid, pool: CanaryPool, runs: RunLayout[]): UserInputError[] {
  const errors: UserInputError[] = [];
  const tooLong = new Map<
    string,
    { run: RunLayout; renderer: ReturnType<typeof runRenderer>; limit: number; longest: number; visibilities: string[] }
  >();
  const backgroundLongest = new Map<string, number>();
  const pretrainLongest = new Map<string, number>();
  // A canary's training row and probes are the same in every run that shares its task and cue
  // (every seed of a cell): counted once each, not once per run (10,000 runs built 10,000 probe sets).
  const canaryLongest = new Map<Task, Map<string, number>>();
  const probeOptions = { kinds: grid.doc.probes.kinds, decode: grid.doc.probes.decode };
  const codeTail = 'x'.repeat(grid.doc.canaries.code.length + 1);
  const counted = (renderer: RunRenderer, key: string, count: () => number): number => {
    let known = canaryLongest.get(renderer.task);
    if (!known) canaryLongest.set(renderer.task, (known = new Map()));
    let n = known.get(key);
    if (n === undefined) known.set(key, (n = count()));
    return n;
  };
  for (const run of runs) {
    const model = run.cell.values.model.value;
    if (model.backend !== 'tiny' || !model.tiny) continue;
    const limit = Math.min(model.tiny.max_len, grid.doc.training.max_length ?? model.tiny.max_len);
    const renderer = runRenderer(grid, run);
    const taskKey = canonicalJson(renderer.taskSpec);
    if (!backgroundLongest.has(taskKey)) {
      let longest = 0;
      for (const row of backgroundToCheck(grid, pool, renderer))
        longest = Math.max(longest, tinyTokens(row.prompt, row.target));
      backgroundLongest.set(taskKey, longest);
    }
    let longest = backgroundLongest.get(taskKey) as number;
    if (model.pretrain) {
      const corpusKey = pretrainCorpusKey(renderer.taskSpec, model.pretrain);
      if (!pretrainLongest.has(corpusKey)) {
        let most = 0;
        let i = 0;
        for (const line of pretrainRowLines(grid, pool, renderer.task, renderer.taskSpec, model.pretrain)) {
          const row = JSON.parse(line) as { prompt: Message[]; target: string };
          most = Math.max(most, tinyTokens(row.prompt, row.target));
          if ((i += 1) >= BACKGROUND_SAMPLE) break;
        }
        pretrainLongest.set(corpusKey, most);
      }
      longest = Math.max(longest, pretrainLongest.get(corpusKey) as number);
    }
    const cueKey = `${canonicalJson(renderer.rowSpec)}|${canonicalJson([run.cell.values.visibility.value, run.secrets?.space ?? null])}`;
    const canaryKey = (c: PoolCanary) => `${cueKey}|${c.id}|${c.code}|${c.substitute}`;
    for (const c of run.canaries) {
      const row = () => {
        const example = canaryTrainingRow(pool, renderer, c.canary);
        return tinyTokens(example.prompt, example.target);
      };
      longest = Math.max(longest, counted(renderer, `row|${canaryKey(c.canary)}`, row));
    }
    // The probed canaries as the manifest lists them (buildManifestCore): focal (and auxiliary), then held out.
    const probed = [
      ...run.canaries.filter((c) => grid.doc.probes.auxiliary || c.cohort === 'focal').map((c) => c.canary),
      ...run.heldOut,
    ];
    for (const c of probed) {
      const probes = () =>
        canaryProbes(pool, renderer.task, renderer.rowSpec, renderer.cue, c, probeOptions).reduce(
          (n, p) => Math.max(n, tinyTokens(p.prompt, `${p.prefill}${codeTail}`)),
          0,
        );
      longest = Math.max(longest, counted(renderer, `probes|${canaryKey(c)}`, probes));
    }
    // One line per task and model: every visibility whose rows are too long, the longest figure.
    const key = `${run.cell.values.task.key}|${run.cell.values.model.key}`;
    if (longest > limit) {
      const seen = tooLong.get(key) ?? { run, renderer, limit, longest, visibilities: [] };
      seen.longest = Math.max(seen.longest, longest);
      if (!seen.visibilities.includes(run.cell.values.visibility.label))
        seen.visibilities.push(run.cell.values.visibility.label);
      tooLong.set(key, seen);
    }
  }
  for (const { run, renderer, limit, longest, visibilities } of tooLong.values()) {
    const task = run.cell.values.task;
    const spec = renderer.taskSpec;
    const fix = renderer.task.allRows
      ? 'shorter rows (system: null, shorter templates), '
      : spec.name === 'synthetic-email' && spec.params.style === 'full'
        ? 'style compact, '
        : '';
    errors.push(
      new UserInputError(
        `task ${task.label} with ${visibilities.join(' and ')} cues renders rows of up to ${longest} tokens, but model ${run.cell.values.model.label} reads at most ${limit}; use ${fix ? `${fix.replace(/^use /, '')}` : ''}max_len ${longest} or more on the model, or a real model`,
        { location: grid.source.locate(task.path), field: formatPath(task.path), code: 'E_ROW_LENGTH' },
      ),
    );
  }
  return errors;
}

/** A row as the trainer renders it for a length count. */
export interface TokenRow {
  prompt: Message[];
  target: string;
}

/** Rows over the limit by index into the rows given; `skipped` when the count could not run. */
export type TokenCount =
  | { skipped: string }
  | {
      rows: number;
      limit: number;
      longest: number;
      over: { i: number; tokens: number }[];
      over_count: number;
      /** The first image size the model's image processor would not take as it is: why, and the fix. */
      image_refused?: string;
    };

/** One model's rows to count (maxLength: the grid's training.max_length). */
export interface TokenJob {
  model: ModelSpec;
  rows: TokenRow[];
  maxLength: number;
}

/** Counts each job's rows in its model's tokens, one answer per job in order (all at once: one trainer start). */
export type TokenCounter = (jobs: TokenJob[]) => Promise<TokenCount[]>;

/** What the hf check reads of a plan (an AuditPlan is one). */
export interface PlannedRuns {
  grid: LoadedGrid;
  pool: CanaryPool;
  auditId: string;
  runs: RunLayout[];
}

/**
 * A Hugging Face model reads at most `training.max_length` tokens (and its own positions). For
 * every (hf model, task) of the plan, `count` measures the rows: every row of a dataset-backed task
 * (a generated task: a sample of its background, `backgroundToCheck`), the utility rows, each
 * visibility's canary rows and the probes. A count that is skipped (the model's tokenizer is not
 * on this machine) checks nothing; the trainer still does, when it runs. One error per model and
 * task.
 */
export async function checkHfLengths(plan: PlannedRuns, count: TokenCounter): Promise<UserInputError[]> {
  const groups = new Map<string, RunLayout[]>();
  for (const run of plan.runs) {
    const m = run.cell.values.model.value;
    if (m.backend !== 'hf') continue;
    // Image rows count too: the trainer's count adds each image part's tokens from its width and
    // height, as the model's image processor splits it (canary_trainer.check_rows).
    const key = `${run.cell.values.model.key}|${run.cell.values.task.key}`;
    groups.set(key, [...(groups.get(key) ?? []), run]);
  }
  const checks = [...groups.values()].map((runs) => {
    const first = runs[0] as RunLayout;
    return {
      first,
      job: {
        model: buildManifestCore(plan.grid, plan.auditId, plan.pool, first).model,
        rows: hfRowsToCheck(plan, runs),
        maxLength: plan.grid.doc.training.max_length ?? 1024,
      },
    };
  });
  if (checks.length === 0) return [];
  const counts = await count(checks.map((c) => c.job));
  const errors: UserInputError[] = [];
  for (const [k, { first, job }] of checks.entries()) {
    const out = counts[k] as TokenCount;
    if ('skipped' in out) {
      log.debug({ model: job.model.name, why: out.skipped }, 'row lengths not checked at plan time');
      continue;
    }
    if (out.image_refused) {
      const task = first.cell.values.task;
      errors.push(
        new UserInputError(
          `task ${task.label} draws images model ${first.cell.values.model.label} would not take as they are: ${out.image_refused}`,
          {
            location: plan.grid.source.locate(task.path),
            field: formatPath(task.path),
            code: 'E_IMAGE_SIZE',
          },
        ),
      );
    }
    if (out.over_count > 0) {
      const task = first.cell.values.task;
      const worst = out.over
        .map((o) => `${o.tokens.toLocaleString('en-US')} tokens: ${preview(job.rows[o.i] as TokenRow)}`)
        .slice(0, 2)
        .join('; ');
      errors.push(
        new UserInputError(
          `task ${task.label} renders ${out.over_count.toLocaleString('en-US')} of ${out.rows.toLocaleString('en-US')} checked rows longer than model ${first.cell.values.model.label} reads (${out.limit.toLocaleString('en-US')} tokens: training.max_length and the model's positions), up to ${out.longest.toLocaleString('en-US')}; raise training.max_length or shorten the rows (${worst})`,
          { location: plan.grid.source.locate(task.path), field: formatPath(task.path), code: 'E_ROW_LENGTH' },
        ),
      );
    }
  }
  return errors;
}

function hfRowsToCheck(plan: PlannedRuns, runs: RunLayout[]): TokenRow[] {
  const { grid, pool } = plan;
  const seen = new Set<string>();
  const rows: TokenRow[] = [];
  const add = (row: TokenRow): void => {
    const key = canonicalJson(row);
    if (!seen.has(key)) {
      seen.add(key);
      rows.push({ prompt: row.prompt, target: row.target });
    }
  };
  const renderer = runRenderer(grid, runs[0] as RunLayout);
  for (const row of backgroundToCheck(grid, pool, renderer)) add(row);
  for (const line of utilityRowLines(grid, pool, renderer)) add(JSON.parse(line) as TokenRow);
  // Canary rows and probes differ by visibility (an encoded cue is longer): one run of each.
  const byVisibility = new Map(runs.map((r) => [r.cell.values.visibility.key, r]));
  const code = '0'.repeat(grid.doc.canaries.code.length);
  for (const run of byVisibility.values()) {
    const r = runRenderer(grid, run);
    for (const c of run.canaries) add(canaryTrainingRow(pool, r, c.canary));
    for (const p of buildManifestCore(grid, plan.auditId, pool, run).probes)
      add({ prompt: p.prompt, target: `${p.prefill}${code}` });
  }
  return rows;
}

function preview(row: TokenRow): string {
  const text = (row.prompt.length > 0 ? messageText(row.prompt.at(-1) as Message) : '').replace(/\s+/g, ' ');
  return JSON.stringify(text.length > 60 ? `${text.slice(0, 57)}...` : text);
}
