import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { execa } from 'execa';
import { messageText, type Message } from '../contracts/index.js';
import { UserInputError, UserInputErrors } from '../errors.js';
import { formatPath } from '../grid/index.js';
import { canonicalJson } from '../hash.js';
import { HubCache, hubCacheDir, isHubId } from '../hub/index.js';
import { log } from '../log.js';
import { backgroundToCheck, buildManifestCore, canaryTrainingRow, runRenderer, utilityRowLines, type AuditPlan, type RunLayout } from '../manifest/index.js';
import { TRAINER_DIR } from '../paths.js';
import { trainerPython, trainerPythonHint } from '../runner/python.js';

/**
 * A Hugging Face model reads at most `training.max_length` tokens (and its own positions); a
 * longer row fails its run when the trainer loads the rows, after the queue wait. At plan time,
 * for every (hf model, task) of the plan whose tokenizer is on this machine, the trainer's own
 * rendering and tokenizer count the rows (`canary_trainer.check_rows`, no weights loaded): every
 * row of a dataset-backed task (a generated task: a sample of its background, `backgroundToCheck`), the utility rows,
 * each visibility's canary rows and the probes. A model that is not here yet is not checked (the
 * trainer still is, when it runs).
 */
interface Row {
  prompt: Message[];
  target: string;
}

/** Throws the plan's row-length errors (one per hf model and task), if any. */
export async function refuseLongRows(plan: AuditPlan): Promise<void> {
  const errors = await checkHfRowLengths(plan);
  if (errors.length > 0) throw new UserInputErrors(errors);
}

export async function checkHfRowLengths(plan: AuditPlan): Promise<UserInputError[]> {
  const groups = new Map<string, RunLayout[]>();
  for (const run of plan.runs) {
    const m = run.cell.values.model.value;
    if (m.backend !== 'hf') continue;
    const key = `${run.cell.values.model.key}|${run.cell.values.task.key}`;
    groups.set(key, [...(groups.get(key) ?? []), run]);
  }
  const errors: UserInputError[] = [];
  for (const runs of groups.values()) {
    const first = runs[0] as RunLayout;
    const model = buildManifestCore(plan.grid, plan.auditId, plan.pool, first).model;
    const why = unavailable(model.name, model.revision);
    if (why) {
      log.debug({ model: model.name, why }, 'row lengths not checked at plan time');
      continue;
    }
    const rows = rowsToCheck(plan, runs);
    const maxLength = plan.grid.doc.training.max_length ?? 1024;
    const out = await countTokens(model, rows, maxLength);
    if ('skipped' in out) {
      log.debug({ model: model.name, why: out.skipped }, 'row lengths not checked at plan time');
      continue;
    }
    if (out.over_count > 0) {
      const task = first.cell.values.task;
      const worst = out.over.map((o) => `${o.tokens.toLocaleString('en-US')} tokens: ${preview(rows[o.i] as Row)}`).slice(0, 2).join('; ');
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

/** Why the model's tokenizer cannot be read here, or null. */
function unavailable(name: string, revision: string | null): string | null {
  const hint = trainerPythonHint();
  if (hint) return hint;
  let folder: string;
  if (isHubId(name)) {
    const cache = new HubCache(hubCacheDir());
    const sha = cache.cachedSha(name, revision ?? 'main');
    if (sha === null) return `not in the local cache ${cache.dir}`;
    folder = cache.snapshotDir(name, sha);
  } else folder = name;
  return ['tokenizer.json', 'tokenizer_config.json'].some((f) => existsSync(join(folder, f))) ? null : `no tokenizer in ${folder}`;
}

function rowsToCheck(plan: AuditPlan, runs: RunLayout[]): Row[] {
  const { grid, pool } = plan;
  const seen = new Set<string>();
  const rows: Row[] = [];
  const add = (row: Row): void => {
    const key = canonicalJson(row);
    if (!seen.has(key)) {
      seen.add(key);
      rows.push({ prompt: row.prompt, target: row.target });
    }
  };
  const renderer = runRenderer(grid, runs[0] as RunLayout);
  for (const row of backgroundToCheck(grid, pool, renderer)) add(row);
  for (const line of utilityRowLines(grid, pool, renderer)) add(JSON.parse(line) as Row);
  // Canary rows and probes differ by visibility (an encoded cue is longer): one run of each.
  const byVisibility = new Map(runs.map((r) => [r.cell.values.visibility.key, r]));
  const code = '0'.repeat(grid.doc.canaries.code.length);
  for (const run of byVisibility.values()) {
    const r = runRenderer(grid, run);
    for (const c of run.canaries) add(canaryTrainingRow(pool, r, c.canary));
    for (const p of buildManifestCore(grid, plan.auditId, pool, run).probes) add({ prompt: p.prompt, target: `${p.prefill}${code}` });
  }
  return rows;
}

type Counted = { skipped: string } | { rows: number; limit: number; longest: number; over: { i: number; tokens: number }[]; over_count: number };

async function countTokens(model: unknown, rows: Row[], maxLength: number): Promise<Counted> {
  const dir = await mkdtemp(join(tmpdir(), 'canary-row-lengths-'));
  try {
    await writeFile(join(dir, 'model.json'), JSON.stringify(model));
    await writeFile(join(dir, 'rows.jsonl'), rows.map((r) => JSON.stringify(r)).join('\n'));
    const inherited = process.env.PYTHONPATH;
    const result = await execa(trainerPython(), ['-m', 'canary_trainer.check_rows', '--model', join(dir, 'model.json'), '--rows', join(dir, 'rows.jsonl'), '--max-length', String(maxLength)], {
      env: { PYTHONPATH: inherited ? `${TRAINER_DIR}${delimiter}${inherited}` : TRAINER_DIR, HF_HUB_OFFLINE: '1', TRANSFORMERS_OFFLINE: '1', HF_HUB_CACHE: hubCacheDir() },
      reject: false,
      timeout: 300_000,
    });
    if (result.exitCode !== 0) return { skipped: `the token count failed (exit ${String(result.exitCode)}): ${String(result.stderr).split('\n').filter(Boolean).at(-1) ?? ''}` };
    return JSON.parse(String(result.stdout).trim().split('\n').at(-1) ?? '{}') as Counted;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

function preview(row: Row): string {
  const text = (row.prompt.length > 0 ? messageText(row.prompt.at(-1) as Message) : '').replace(/\s+/g, ' ');
  return JSON.stringify(text.length > 60 ? `${text.slice(0, 57)}...` : text);
}
