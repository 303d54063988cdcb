import { terminalSafe, UserInputError } from '../errors.js';
import { planPower, powerText } from '../app/power-plan.js';
// app/plan.js, not the app/ barrel: the barrel brings run's and report's modules (vega, BullMQ),
// ~0.4 s of CPU at every start of plan that it never uses.
import { planGrid } from '../app/plan.js';
import { planTask, pretrainCorpusKey, type AuditPlan, type RunLayout, type WrittenAudit } from '../manifest/index.js';
import { spaceSize } from '../codes/index.js';
import {
  codeSpaceOf,
  comparisonText,
  describePretrain,
  designLine,
  jointSeeds,
  pretrainRows,
  singleRunComparisons,
} from '../grid/index.js';
import type { ModelRevisions } from '../app/pinning.js';
import { stringOption, type Command } from './command.js';
import { NO_PIN_OPTION, revisionLines, revisionsJson, warnUnpinned } from './model-revisions.js';
import { versioned } from './json-output.js';

/** `canary-audit plan GRID [--json] [--out DIR]`: expand a grid and show (or write) its runs. */
export const command: Command = {
  name: 'plan',
  summary: 'Expand an audit grid into run manifests (prints them; --out writes them).',
  usage: 'GRID [--json] [--out DIR] [--no-pin-revisions] [--power] [--pilot AUDIT_DIR] [--effect BITS]',
  description: `
Validates GRID (YAML; see docs/grid.md), expands its axes into cells, draws the canaries and
places them, then prints one line per run: its cell, canary count, appearances per dose and the
fraction of rows that are canaries. Nothing is written unless --out is given.

With --out DIR the audit is written to DIR/audits/<audit_id>/ (audit.json, grid.yaml and
runs/<run_id>/{manifest.json,rows.jsonl,utility.jsonl}, plus pretrain.jsonl for a tiny model
that pretrains its base). Ids are content hashes, so planning
the same grid again writes nothing new.

Each Hugging Face Hub model's revision (default main) is resolved to a commit sha, printed and
written into the manifests. The Hub ($HF_ENDPOINT) is asked; when it cannot be reached (or
HF_HUB_OFFLINE=1) the ref in the local cache answers, and the output says so. A model found
nowhere is an error naming the \`canary-audit models fetch\` command that fetches it.

With --power, after the plan: per comparison the report will decide (inserted vs held-out control
at the highest dose, lowest vs highest dose, each compared axis), the probability that the grid as
written decides it (higher, lower, or equivalent within analysis.margin_bits; α 0.05) and the
cheapest change that reaches 80% (more focal canaries per run, else more seeds per cell). Variance
components and effects come from --pilot AUDIT_DIR (a finished audit with >= 2 seeds: its report's
run, canary and run × canary components, rescaled to this grid); without a pilot, from the
documented defaults of the grid's model backend (tiny: pooled from the claim-grid audits; tiny VLM
and hf: the coverage bench's generator, not yet measured on them), named in the output, at
--effect (default 2 bits). A grid with sequential replicates (replicates: {until: decided}) also
gets, per comparison, the probability of a decision by max seeds under its spending rule and the
expected seeds per cell, the looks read as one growing audit (beside them a bound that holds
whatever the looks' correlation, and the looks read as independent tests). See docs/metrics.md,
"Verdicts and power" and "Sequential replicates".`,
  options: {
    json: { type: 'boolean', description: 'Print the plan as JSON on stdout (schemas/plan-output.schema.json).' },
    out: {
      type: 'string',
      value: 'DIR',
      description: 'Write the audit under DIR/audits/<audit_id>/ (default: print only).',
    },
    'pin-revisions': {
      type: 'boolean',
      description: 'Pin revisions to commit shas (the default; kept for older scripts).',
    },
    ...NO_PIN_OPTION,
    power: {
      type: 'boolean',
      description: 'Also print, per declared comparison, the probability of a decision and the cheapest change to 80%.',
    },
    pilot: {
      type: 'string',
      value: 'AUDIT_DIR',
      description:
        "With --power: take variance components and effects from this finished audit (default: the model backend's documented defaults).",
    },
    effect: {
      type: 'string',
      value: 'BITS',
      description: "With --power: the effect to plan for, bits (default: the pilot's observed effects, else 2).",
    },
  },
  positionals: [1, 1],
  async run(args) {
    const gridPath = args.positionals[0] as string;
    const out = stringOption(args, 'out');
    const pilot = stringOption(args, 'pilot');
    const effectRaw = stringOption(args, 'effect');
    const effect = effectRaw === undefined ? undefined : Number(effectRaw);
    if (effect !== undefined && !Number.isFinite(effect))
      throw new UserInputError(`--effect must be a number of bits, got ${JSON.stringify(effectRaw)}`, {
        field: '--effect',
        code: 'E_BAD_FLAG',
      });
    if ((pilot !== undefined || effect !== undefined) && !args.values.power)
      throw new UserInputError('--pilot and --effect go with --power; add --power', {
        field: pilot !== undefined ? '--pilot' : '--effect',
        code: 'E_BAD_FLAG',
      });
    const { plan, models, written } = await planGrid(gridPath, {
      ...(out ? { out } : {}),
      pinRevisions: !args.values['no-pin-revisions'],
    });
    warnUnpinned(models);
    warnSingleRuns(plan);
    warnFixedBaseSeeds(plan);
    if (args.values.json)
      process.stdout.write(`${JSON.stringify(versioned('plan', planJson(plan, written, models)), null, 2)}\n`);
    else process.stdout.write(terminalSafe(planText(plan, written, models)));
    if (args.values.power) {
      const power = await planPower(plan, {
        ...(pilot !== undefined ? { pilot } : {}),
        ...(effect !== undefined ? { effect } : {}),
      });
      // With --json the plan is the whole of stdout: the power lines go to stderr.
      (args.values.json ? process.stderr : process.stdout).write(terminalSafe(powerText(power)));
    }
    return 0;
  },
};

/**
 * Comparisons of the grid with one run per arm: their intervals cover canary sampling only, so a
 * rerun (another seed, another floating-point path) can fall outside them. Warned on stderr.
 */
export function warnSingleRuns(plan: AuditPlan): void {
  const single = singleRunComparisons(plan.runs.map((r) => r.cell));
  if (single.length === 0) return;
  const shown = single.slice(0, 6).map(comparisonText);
  const more = single.length > shown.length ? `, and ${single.length - shown.length} more` : '';
  process.stderr.write(
    `canary-audit: warning: ${single.length} comparison(s) rest on one run per arm — one run: a rerun can fall outside its interval: ${shown.join('; ')}${more}. Add replicates (axes: seed: [0, 1, 2]) to measure run-to-run spread.\n`,
  );
}

/**
 * A tiny model whose base is fixed for every seed (`pretrain.init_seed`) under seeds that vary the
 * training only: the seeds of a cell then differ in the training seed alone (dropout, which the
 * tiny presets do not use), so its runs can be identical and their spread says nothing. Warned on
 * stderr with the fix.
 */
export function warnFixedBaseSeeds(plan: AuditPlan): void {
  if (jointSeeds(plan.grid)) return;
  const seedsByModel = new Map<string, Set<number>>();
  for (const r of plan.runs) {
    const m = r.cell.values.model;
    if (m.value.pretrain?.init_seed === undefined) continue;
    seedsByModel.set(m.label, (seedsByModel.get(m.label) ?? new Set()).add(r.cell.values.seed.value));
  }
  const models = [...seedsByModel].filter(([, seeds]) => seeds.size > 1).map(([label]) => label);
  if (models.length === 0) return;
  process.stderr.write(
    `canary-audit: warning: model(s) ${models.join(', ')} fix their base for every seed (pretrain.init_seed) while the seeds vary the training seed only, so the runs of a cell can be identical; use replicates: {vary: joint} (the default where a tiny base is pretrained) to give each seed its own data order and canary placement.\n`,
  );
}

export function planJson(plan: AuditPlan, written?: WrittenAudit, models?: ModelRevisions): Record<string, unknown> {
  const { doc } = plan.grid;
  const datasets = datasetsOf(plan);
  return {
    audit_id: plan.auditId,
    name: plan.name,
    grid_file: plan.gridFile,
    grid_sha256: plan.grid.sha256,
    rows: plan.grid.rows,
    updates: plan.grid.updates,
    batch_size: doc.training.batch_size,
    candidate_space: {
      kind: doc.candidates.kind,
      size: doc.candidates.kind === 'sampled' ? 1 + (doc.candidates.decoys ?? 0) : spaceSize(codeSpaceOf(doc)),
    },
    single_run_comparisons: singleRunComparisons(plan.runs.map((r) => r.cell)),
    design: {
      vary: plan.grid.design.vary,
      written: plan.grid.design.written,
      population: plan.grid.design.population,
      seeds: plan.grid.design.seeds,
      line: designLine(
        plan.grid.design,
        plan.runs.map((r) => r.cell),
      ),
    },
    ...(written ? { audit_dir: written.auditDir } : {}),
    models: revisionsJson(models),
    ...(datasets.length > 0 ? { datasets } : {}),
    runs: plan.runs.map((run, k) => {
      const w = written?.runs[k];
      const probed =
        run.canaries.filter((c) => doc.probes.auxiliary || c.cohort === 'focal').length + run.heldOut.length;
      return {
        cell_id: run.cell.id,
        cell: run.cell.labels,
        canaries: run.canaries.length,
        held_out: run.heldOut.length,
        probes: probed * doc.probes.kinds.length,
        appearances_by_dose: run.stats.appearancesByDose,
        canary_rows: run.stats.canaryRows,
        canary_fraction: run.stats.canaryFraction,
        pretrain: pretrainJson(run),
        ...(w ? { run_id: w.runId, run_dir: w.runDir, manifest: w.manifestPath, created: w.created } : {}),
      };
    }),
  };
}

/** `canaries.designs: together`: which designs share each run and how many canaries each takes. */
function togetherLines(plan: AuditPlan, n: (x: number) => string): string[] {
  const run = plan.runs.find((r) => r.together);
  if (!run?.together) return [];
  const t = run.together;
  const share = plan.pool.all().filter((c) => c.id.startsWith('f') || c.id.startsWith('h')).length / t.designs.length;
  return [
    `designs together: ${t.designs.map((d) => d.label).join(' + ')} in each run, ${share} canaries each (split by draw order); every canary ranked among ${n(t.size)} candidates of its own design`,
  ];
}

export function planText(plan: AuditPlan, written?: WrittenAudit, models?: ModelRevisions): string {
  const { doc } = plan.grid;
  const n = (x: number): string => x.toLocaleString('en-US');
  const size = doc.candidates.kind === 'sampled' ? 1 + (doc.candidates.decoys ?? 0) : spaceSize(codeSpaceOf(doc));
  const lines = [
    `${plan.auditId}  ${plan.name}: ${plan.runs.length} run(s), ${n(plan.grid.rows)} rows each (${n(plan.grid.updates)} updates x batch ${doc.training.batch_size})`,
    `held-out canaries: ${doc.canaries.held_out} per run; probes: ${doc.probes.kinds.join(', ')} (decode ${doc.probes.decode.join(', ')}); candidates: ${doc.candidates.kind} ${n(size)}`,
    ...togetherLines(plan, n),
    ...baseModelLines(plan),
    designLine(
      plan.grid.design,
      plan.runs.map((r) => r.cell),
    ),
    ...revisionLines(models),
    ...datasetsOf(plan).map(
      (d) =>
        `dataset ${d.task}: ${d.source === 'hub' ? `${d.repo}@${d.revision} -> ${d.sha}` : d.path}; ${n(d.train_rows)} train rows, ${n(d.utility_rows)} utility rows`,
    ),
    '',
  ];
  const table = plan.runs.map((run, k) => {
    const doses = Object.entries(run.stats.appearancesByDose)
      .sort(([a], [b]) => Number(a) - Number(b))
      .map(([d, count]) => `d${d}:${count}`)
      .join(' ');
    return [
      run.cell.id,
      String(run.canaries.length),
      doses === '' ? '-' : doses,
      n(run.stats.canaryRows),
      `${(100 * run.stats.canaryFraction).toFixed(2)}%`,
      ...(written ? [written.runs[k]?.runId ?? ''] : []),
    ];
  });
  const header = ['cell', 'canaries', 'appearances by dose', 'canary rows', 'fraction', ...(written ? ['run id'] : [])];
  const widths = header.map((h, i) => Math.max(h.length, ...table.map((r) => (r[i] ?? '').length)));
  const fmt = (r: string[]): string =>
    r
      .map((c, i) => (i === 0 || i === 2 ? c.padEnd(widths[i] as number) : c.padStart(widths[i] as number)))
      .join('  ')
      .trimEnd();
  lines.push(fmt(header), ...table.map(fmt));
  if (written) {
    const created = written.runs.filter((r) => r.created).length;
    lines.push('', `wrote ${written.auditDir} (${created} new run(s), ${written.runs.length - created} unchanged)`);
  } else {
    lines.push('', 'nothing written; add --out DIR to write the manifests');
  }
  return `${lines.join('\n')}\n`;
}

/** Each dataset-backed task value of the plan: its source as pinned, and its rows per role. */
function datasetsOf(plan: AuditPlan): {
  task: string;
  source: 'hub' | 'local';
  repo?: string;
  revision?: string;
  sha?: string;
  path?: string;
  train_rows: number;
  utility_rows: number;
}[] {
  return plan.grid.expansion.axes.task.flatMap((value) => {
    const task = planTask(plan, value);
    const d = task.dataset;
    if (!d) return [];
    // The task counts its own rows: a grounding task lists no allRows, and a utility source apart
    // (withUtilitySource) is not among the training rows, so a difference of the two was wrong (-1).
    const utility = task.utilityRows ?? 0;
    return [
      {
        task: value.label,
        source: d.source,
        ...(d.repo ? { repo: d.repo, revision: d.revision ?? 'main' } : {}),
        ...(d.sha ? { sha: d.sha } : {}),
        ...(d.path ? { path: d.path } : {}),
        train_rows: task.trainRows ?? 0,
        utility_rows: utility,
      },
    ];
  });
}

/** A tiny run's pretraining in --json (null: trained from scratch, or not a tiny model). */
function pretrainJson(run: RunLayout): Record<string, unknown> | null {
  const p = run.cell.values.model.value.pretrain;
  if (!p) return null;
  return {
    updates: p.updates,
    batch_size: p.batch_size,
    rows: pretrainRows(p),
    lr: p.lr,
    schedule: { ...p.schedule },
    code_fraction: p.code_fraction,
    seed: p.seed,
    ...(p.init_seed !== undefined ? { init_seed: p.init_seed } : {}),
  };
}

/**
 * One line per distinct tiny base model: what it is pretrained on, once for all the runs that
 * share it. Those runs share the corpus bytes; the trainer builds one base per seed (the seed
 * axis initialises it) and reuses it from its cache.
 */
function baseModelLines(plan: AuditPlan): string[] {
  const bases = new Map<string, { line: string; pretrained: boolean; runs: number; seeds: Set<number> }>();
  for (const run of plan.runs) {
    const model = run.cell.values.model;
    if (model.value.backend !== 'tiny') continue;
    const p = model.value.pretrain;
    const key = `${model.key}\u0000${p ? pretrainCorpusKey(run.cell.values.task.value, p) : ''}`;
    const line = p
      ? `base model ${model.label}: pretrained on ${describePretrain(p)}`
      : `base model ${model.label}: none, trained from scratch (pretrain: false)`;
    const base = bases.get(key) ?? {
      line,
      pretrained: p !== null && p !== undefined,
      runs: 0,
      seeds: new Set<number>(),
    };
    base.runs += 1;
    base.seeds.add(p?.init_seed ?? run.cell.values.seed.value);
    bases.set(key, base);
  }
  return [...bases.values()].map(
    (b) => `${b.line}; ${b.runs} run(s)${b.pretrained ? `, ${b.seeds.size} base(s)` : ''}`,
  );
}
