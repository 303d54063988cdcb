import { UserInputError } from '../errors.js';
import { canonicalJson } from '../hash.js';
import { formatPath, type LoadedGrid } from '../grid/index.js';
import type { Message } from '../contracts/index.js';
import type { CanaryPool } from './canaries.js';
import { buildManifestCore, runRenderer, type RunRenderer } from './manifest.js';
import { canaryTrainingRow } from './rows.js';
import type { TaskExample } from './tasks/index.js';
import type { RunLayout } from './plan-run.js';
import { pretrainCorpusKey, pretrainRowLines } from './pretrain.js';
import { Rng } from '../random.js';

/**
 * The tiny model reads characters, so a row's length in tokens is known before training: its
 * characters plus the chat rendering (a role marker, an end marker and a newline per message,
 * then the assistant marker and the final end marker). A row longer than the model's context
 * would fail in the trainer after the queue wait; catch it at plan time instead, naming the task.
 * Background and pretraining rows are checked on a sample from the start of their streams.
 */
const BACKGROUND_SAMPLE = 256;

/**
 * The background rows a length check reads for a task: every row of a dataset-backed task (all
 * known), else the first BACKGROUND_SAMPLE rows of its background stream.
 */
export function* backgroundToCheck(grid: LoadedGrid, pool: CanaryPool, renderer: RunRenderer): Generator<TaskExample> {
  const { task, taskSpec } = renderer;
  if (task.allRows) {
    yield* task.allRows();
    return;
  }
  const next = task.rows(new Rng(grid.doc.seed, 'background', canonicalJson(taskSpec)), pool.identityKeys(task), 'train');
  for (let i = 0; i < Math.min(BACKGROUND_SAMPLE, grid.rows); i += 1) yield next();
}

export function tinyTokens(prompt: Message[], target: string): number {
  return prompt.reduce((n, m) => n + m.content.length + 3, 0) + 2 + target.length;
}

export function checkTinyLengths(grid: LoadedGrid, pool: CanaryPool, runs: RunLayout[]): UserInputError[] {
  const errors: UserInputError[] = [];
  const tooLong = new Map<string, { run: RunLayout; renderer: ReturnType<typeof runRenderer>; limit: number; longest: number; visibilities: string[] }>();
  const backgroundLongest = new Map<string, number>();
  const pretrainLongest = new Map<string, number>();
  for (const run of runs) {
    const model = run.cell.values.model.value;
    if (model.backend !== 'tiny' || !model.tiny) continue;
    const limit = Math.min(model.tiny.max_len, grid.doc.training.max_length ?? model.tiny.max_len);
    const renderer = runRenderer(grid, run);
    const taskKey = canonicalJson(renderer.taskSpec);
    if (!backgroundLongest.has(taskKey)) {
      let longest = 0;
      for (const row of backgroundToCheck(grid, pool, renderer)) longest = Math.max(longest, tinyTokens(row.prompt, row.target));
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
    const manifest = buildManifestCore(grid, 'audit-000000000000', pool, run);
    for (const c of run.canaries) {
      const row = canaryTrainingRow(pool, renderer, c.canary);
      longest = Math.max(longest, tinyTokens(row.prompt, row.target));
    }
    for (const p of manifest.probes) longest = Math.max(longest, tinyTokens(p.prompt, `${p.prefill}${'x'.repeat(grid.doc.canaries.code.length + 1)}`));
    // One line per task and model: every visibility whose rows are too long, the longest figure.
    const key = `${run.cell.values.task.key}|${run.cell.values.model.key}`;
    if (longest > limit) {
      const seen = tooLong.get(key) ?? { run, renderer, limit, longest, visibilities: [] };
      seen.longest = Math.max(seen.longest, longest);
      if (!seen.visibilities.includes(run.cell.values.visibility.label)) seen.visibilities.push(run.cell.values.visibility.label);
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
