import type { LoadedRun } from './load-audit.js';

/**
 * The replication design of an audit, read back from its manifests (so an audit planned before
 * the design had a name reads the same way): how many seeds, how many bases each model's runs
 * start from, and whether a cell's seeds train on their own rows (data order and canary
 * placement) or on the same rows. From those, the population an interval over a cell's runs
 * generalizes over: fine-tuning seeds of one base, or bases and seeds (docs/grid.md, replicates).
 */
export type ReportPopulation =
  | 'fine-tuning seeds of one base'
  | 'bases and seeds'
  | 'seeds of from-scratch training'
  | 'one run per cell';

export interface ReportDesign {
  population: ReportPopulation;
  /** Distinct seed values among the runs with a manifest. */
  seeds: number;
  /** Per model (its cell label): distinct bases its runs fine-tune (0: trained from scratch). */
  bases: { model: string; bases: number }[];
  /** What differs between the seeds of one cell besides the seed: their rows, or nothing the controller draws. */
  seeds_vary: 'data order and placement' | 'training seed only' | null;
  /** One sentence for the methods section. */
  text: string;
}

const label = (v: unknown): string => (v === null || v === undefined ? '' : String(v));

export function reportDesign(runs: readonly LoadedRun[], seedAxes: readonly string[]): ReportDesign | null {
  const planned = runs.filter((r) => r.manifest !== null);
  if (planned.length === 0) return null;
  const seedOf = (r: LoadedRun): string => seedAxes.map((a) => label(r.cell[a])).join('\u0000');
  const seeds = new Set(planned.map(seedOf)).size;
  const byModel = new Map<string, Set<string>>();
  for (const r of planned) {
    const set = byModel.get(label(r.cell.model)) ?? new Set<string>();
    const key = r.manifest?.base ?? null;
    if (key !== null) set.add(key);
    byModel.set(label(r.cell.model), set);
  }
  const bases = [...byModel].map(([model, keys]) => ({ model, bases: keys.size }));
  // A cell's seeds: the runs equal in every other axis.
  const arms = new Map<string, Set<string>>();
  for (const r of planned) {
    const arm = JSON.stringify(Object.entries(r.cell).filter(([axis]) => !seedAxes.includes(axis)));
    arms.set(arm, (arms.get(arm) ?? new Set()).add(`${seedOf(r)}\u0001${r.manifest?.rows_sha256 ?? ''}`));
  }
  const replicated = [...arms.values()].filter((s) => new Set([...s].map((x) => x.split('\u0001')[0])).size > 1);
  const seedsVary =
    replicated.length === 0
      ? null
      : replicated.some((s) => new Set([...s].map((x) => x.split('\u0001')[1])).size > 1)
        ? 'data order and placement'
        : 'training seed only';
  const population: ReportPopulation =
    replicated.length === 0
      ? 'one run per cell'
      : bases.some((b) => b.bases > 1)
        ? 'bases and seeds'
        : bases.some((b) => b.bases === 1)
          ? 'fine-tuning seeds of one base'
          : 'seeds of from-scratch training';
  const baseWords = bases
    .map(
      (b) =>
        `${b.model || 'model'}: ${b.bases === 0 ? 'from scratch' : b.bases === 1 ? 'one base' : `${b.bases} bases`}`,
    )
    .join('; ');
  const text =
    population === 'one run per cell'
      ? `Design: one run per cell (${baseWords}); intervals cover canary sampling only, and a rerun can fall outside them.`
      : `Design: ${seeds} seeds (${baseWords}); the seeds of a cell differ in ${seedsVary === 'data order and placement' ? 'their data order and canary placement' : 'the training seed only (the same rows)'}${population === 'bases and seeds' ? ' and in the base they fine-tune' : ''}. Intervals over a cell's runs generalize over ${population}${population === 'fine-tuning seeds of one base' ? ', not over other bases: another pretrained base can land outside them' : ''}.`;
  return { population, seeds, bases, seeds_vary: seedsVary, text };
}
