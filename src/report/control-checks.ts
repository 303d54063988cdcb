import { clopperPearson } from '../metrics/distributions.js';
import { cellLabel, formatValue, varyingAxes } from '../metrics/cells.js';
import { canaryKey, type Observation } from '../metrics/observation.js';
import { clopperPearsonEpsilon, tprAtFpr, type ScoredCanary } from '../metrics/privacy.js';
import type { LoadedAudit, LoadedRun } from './load-audit.js';
import type { RunOutcome } from './observe.js';
import type { ReportWarning } from './provenance-check.js';

/**
 * Controls that fail loud: preconditions a reader cannot see in the figures, each checked from the
 * stored artifacts and raised as a named warning (report top, summary.json, `run`'s last lines).
 *
 * - `weights_unchanged`: a trained run left a trainable parameter group where it started
 *   (result.json weight_change); its scores measure the base model, not fine-tuning.
 * - `null_broken`: canaries that were never inserted score apart from each other — per cell, the
 *   no-canary control's would-be focal canaries against its held-out ones, or (without that
 *   control) two halves of the held-out canaries: an ε lower bound above 0 or a TPR at 1% FPR whose
 *   interval lies above the FPR's, each of the 2k tests (k comparisons) at 1 − α/(2k) (Bonferroni).
 * - `base_cannot_copy`: the grid has a visible arm and some seed's base does not copy a code it is
 *   shown (base phase, substituted probes, fewer than 90% copied): the visible arm's "stays at its
 *   control" rests on a base that cannot do the copying the comparison assumes.
 * - `scores_all_tied`: every canary score of a cell (final phase, hidden probes, or each kind of a
 *   cell without them) is the same: nothing there can tell members, doses or arms apart.
 */
export interface ControlCheckInput {
  audit: LoadedAudit;
  observations: readonly Observation[];
  outcomes: ReadonlyMap<string, RunOutcome>;
  seedAxes: readonly string[];
  /** Two-sided level of the null comparisons as a family. */
  confidence: number;
  /** δ of the ε bound (the privacy readouts' δ). */
  delta: number;
}

/**
 * A copy rate below this (per seed, base phase) means the base does not copy shown codes reliably
 * enough for the visible arm's comparison. Measured on the GUI-VLM grid (docs/reproduction.md; one
 * seed per base): a base copying 0 of 16 shown codes left visible dose 32 +2.34 to +5.35 bits above
 * its control, one copying 12 of 16 (75%) still +1.39 [+0.08, +3.07], one copying 16 of 16 −0.20
 * [−2.66, +2.26]. The cut lies between 75% and 100%; 90% lets one miss in 10 pass.
 */
export const BASE_COPY_FLOOR = 0.9;
/** The FPR of the null comparison's TPR check. */
export const NULL_FPR = 0.01;
/** Messages list this many runs or cells, then "…". */
const LIST = 4;

export function controlWarnings(input: ControlCheckInput): ReportWarning[] {
  return [weightsUnchanged(input), nullBroken(input), baseCannotCopy(input), scoresAllTied(input)].flatMap((w) =>
    w ? [w] : [],
  );
}

function listed<T>(xs: readonly T[], show: (x: T) => string): string {
  return `${xs.slice(0, LIST).map(show).join('; ')}${xs.length > LIST ? `; … (${xs.length} in all)` : ''}`;
}

function finished(audit: LoadedAudit, outcomes: ReadonlyMap<string, RunOutcome>): LoadedRun[] {
  return audit.runs.filter((r) => r.status === 'finished' && outcomes.has(r.run_id));
}

function weightsUnchanged({ audit, outcomes }: ControlCheckInput): ReportWarning | null {
  const still = finished(audit, outcomes).flatMap((run) => {
    const w = outcomes.get(run.run_id)?.weightChange;
    return w && w.total > 0 && w.changed < w.total ? [{ run, w }] : [];
  });
  if (still.length === 0) return null;
  const parts = listed(still, ({ run, w }) => {
    const names = w.groups.filter((g) => !(g.norm_delta > 0)).map((g) => g.name);
    return `${run.run_id} (${run.cell_id}): ${w.changed} of ${w.total} parameter groups moved since update ${w.since_update}${w.changed > 0 ? `, unchanged: ${names.slice(0, 3).join(', ')}${names.length > 3 ? ', …' : ''}` : ''}`;
  });
  return {
    kind: 'weights_unchanged',
    message: `${still.length} trained run(s) left trainable weights exactly where fine-tuning started: ${parts}. Their scores measure the model before fine-tuning (check the learning rate, the optimizer, frozen layers or LoRA adapters).`,
    runs: still.map((s) => s.run.run_id),
    cells: [...new Set(still.map((s) => s.run.cell_id))],
  };
}

/** Final-phase observations of one run for its membership probe kind (hidden when it has them). */
function membershipObservations(observations: readonly Observation[]): Map<string, Observation[]> {
  const byRun = new Map<string, Observation[]>();
  for (const x of observations) {
    if (x.phase !== 'final') continue;
    const list = byRun.get(x.run_id);
    if (list) list.push(x);
    else byRun.set(x.run_id, [x]);
  }
  for (const [id, list] of byRun) {
    const kinds = new Set(list.map((x) => x.probe_kind));
    const kind = kinds.has('hidden') ? 'hidden' : [...kinds].sort()[0];
    byRun.set(
      id,
      list.filter((x) => x.probe_kind === kind),
    );
  }
  return byRun;
}

interface NullComparison {
  /** The cell less its seed axes (label): the seeds' runs are pooled. */
  cell: string;
  cell_ids: string[];
  runs: string[];
  what: string;
  scored: ScoredCanary[];
}

/**
 * One score per canary of a group of runs: its mean final-phase exposure over the group's finished runs
 * (crossed canaries: one value per canary, not one per run, so the comparison's canaries are
 * independent draws; nested: each canary is in one run anyway).
 */
interface CellCanaries {
  run_ids: string[];
  cell_ids: string[];
  /** Per role and canary (id and code): the sum and count of its exposures over the cell's runs. */
  pools: Map<string, { role: string; id: string; sum: number; n: number }>;
}

function cellCanaries(
  runs: readonly LoadedRun[],
  byRun: ReadonlyMap<string, Observation[]>,
  roles: readonly string[],
  group: (run: LoadedRun) => string,
): Map<string, CellCanaries> {
  const cells = new Map<string, CellCanaries>();
  for (const run of runs) {
    const xs = (byRun.get(run.run_id) ?? []).filter((x) => roles.includes(x.role));
    if (xs.length === 0) continue;
    const label = group(run);
    const cell: CellCanaries = cells.get(label) ?? { run_ids: [], cell_ids: [], pools: new Map() };
    cell.run_ids.push(run.run_id);
    if (!cell.cell_ids.includes(run.cell_id)) cell.cell_ids.push(run.cell_id);
    for (const x of xs) {
      const key = `${x.role}\u0000${canaryKey(x)}`;
      const c = cell.pools.get(key) ?? { role: x.role, id: canaryKey(x), sum: 0, n: 0 };
      c.sum += x.exposure;
      c.n += 1;
      cell.pools.set(key, c);
    }
    cells.set(label, cell);
  }
  return cells;
}

/**
 * The null comparisons of an audit: per no-canary cell (seeds pooled), its would-be focal canaries
 * ("members") against its held-out ones; without any, one comparison over the whole audit: the
 * held-out canaries sorted by id and code, the first half against the second (generation and
 * probe order: a scoring fault that depends on where a canary sits shows there). Each canary
 * scores its mean over the runs that hold it. No order of the input can change either split.
 */
export function nullComparisons(
  audit: LoadedAudit,
  observations: readonly Observation[],
  outcomes: ReadonlyMap<string, RunOutcome>,
  seedAxes: readonly string[],
): NullComparison[] {
  const byRun = membershipObservations(observations);
  const runs = finished(audit, outcomes);
  // Labels name the axes that vary, as the report's other labels do.
  const show = varyingAxes(runs.map((r) => r.cell));
  const seedless = (run: LoadedRun): string =>
    cellLabel(Object.fromEntries(Object.entries(run.cell).filter(([k]) => !seedAxes.includes(k))), show);
  const noCanaryRuns = runs.filter((r) => r.manifest?.no_canary);
  const noCanary = [...cellCanaries(noCanaryRuns, byRun, ['no_canary', 'held_out'], seedless)].flatMap(([cell, c]) => {
    const scored = [...c.pools.values()].map((x) => ({ score: x.sum / x.n, member: x.role === 'no_canary' }));
    return scored.some((x) => x.member) && scored.some((x) => !x.member)
      ? [
          {
            cell,
            cell_ids: c.cell_ids,
            runs: c.run_ids,
            what: 'no-canary control: would-be focal vs held-out canaries',
            scored,
          },
        ]
      : [];
  });
  if (noCanary.length > 0) return noCanary;
  // One comparison for the whole audit: the most canaries, and a run's shift moves every canary alike.
  return [...cellCanaries(runs, byRun, ['held_out'], () => '(all runs)')].flatMap(([cell, c]) => {
    const held = [...c.pools.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    if (held.length < 4) return [];
    const half = Math.floor(held.length / 2);
    return [
      {
        cell,
        cell_ids: c.cell_ids,
        runs: c.run_ids,
        what: 'held-out canaries, first half by id against the second',
        scored: held.map((x, i) => ({ score: x.sum / x.n, member: i < half })),
      },
    ];
  });
}

/** The level of each test of the null family: two tests (ε, TPR) per comparison, k comparisons, Bonferroni. */
export function nullLevel(confidence: number, comparisons: number): number {
  return 1 - (1 - confidence) / (2 * comparisons);
}

export interface NullVerdict {
  /** The Clopper–Pearson ε lower bound at the test's level (null: no bound). */
  epsilon: number | null;
  /** TPR at NULL_FPR: k/n, its lower bound, and the upper bound of the FPR its threshold reached. */
  tpr: { k: number; n: number; lo: number; fpr_hi: number } | null;
  broken: boolean;
  /** What broke it, in words (empty when not broken). */
  why: string;
}

/** One null comparison at level `each`: broken when ε > 0, or when the TPR's lower bound clears the FPR's upper bound. */
export function nullVerdict(scored: readonly ScoredCanary[], each: number, delta: number): NullVerdict {
  const eps = clopperPearsonEpsilon(scored, delta, each);
  const t = tprAtFpr(scored, NULL_FPR, each);
  const nOut = scored.filter((x) => !x.member).length;
  const tpr = t
    ? { k: t.k, n: t.n, lo: t.lo, fpr_hi: clopperPearson(Math.round(t.achieved_fpr * nOut), nOut, each).hi }
    : null;
  const epsBroken = eps !== null && eps.epsilon > 0;
  const tprBroken = tpr !== null && tpr.lo > tpr.fpr_hi;
  const why = [
    epsBroken && eps ? `ε ≥ ${eps.epsilon.toFixed(2)} at δ = ${delta}` : null,
    tprBroken && tpr
      ? `TPR at ${NULL_FPR * 100}% FPR ${tpr.k}/${tpr.n} (interval from ${tpr.lo.toFixed(2)}) above the FPR's interval (to ${tpr.fpr_hi.toFixed(2)})`
      : null,
  ].filter(Boolean);
  return { epsilon: eps?.epsilon ?? null, tpr, broken: epsBroken || tprBroken, why: why.join(', ') };
}

function nullBroken({
  audit,
  observations,
  outcomes,
  seedAxes,
  confidence,
  delta,
}: ControlCheckInput): ReportWarning | null {
  const comparisons = nullComparisons(audit, observations, outcomes, seedAxes);
  if (comparisons.length === 0) return null;
  // One family: a healthy audit raises the warning with probability ≤ 1 − confidence.
  const each = nullLevel(confidence, comparisons.length);
  const broken = comparisons.flatMap((c) => {
    const v = nullVerdict(c.scored, each, delta);
    return v.broken ? [{ c, why: v.why }] : [];
  });
  if (broken.length === 0) return null;
  const level = `${(each * 100).toPrecision(4)}% each (${Math.round(confidence * 100)}% over ${comparisons.length} null comparison${comparisons.length === 1 ? '' : 's'} × 2 tests, Bonferroni)`;
  return {
    kind: 'null_broken',
    message: `the audit's null is broken: canaries that were never inserted score apart from each other in ${broken.length} of ${comparisons.length} null comparison(s) — ${listed(broken, ({ c, why }) => `${c.cell} (${c.what}, ${c.scored.length} canaries, mean over ${c.runs.length} run${c.runs.length === 1 ? '' : 's'}): ${why}`)}; at ${level}. A focal-vs-control difference may then come from the canaries' codes or the scoring, not from training.`,
    runs: broken.flatMap((b) => b.c.runs),
    cells: broken.flatMap((b) => b.c.cell_ids),
  };
}

function seedKey(cell: Record<string, unknown>, seedAxes: readonly string[]): string {
  const parts = seedAxes
    .filter((a) => cell[a] !== undefined && cell[a] !== null)
    .map((a) => `${a}=${formatValue(cell[a])}`);
  return parts.length > 0 ? parts.join(', ') : '(all runs)';
}

/** Per seed: how many substituted probes the base model (phase base, prefill) answered with the shown code. */
export function baseCopyRates(
  audit: LoadedAudit,
  observations: readonly Observation[],
  seedAxes: readonly string[],
): Map<string, { copied: number; n: number }> {
  const cellOf = new Map(audit.runs.map((r) => [r.run_id, r.cell]));
  const rates = new Map<string, { copied: number; n: number }>();
  for (const x of observations) {
    const copied = x.greedy_prefill?.copied;
    if (x.phase !== 'base' || x.probe_kind !== 'substituted' || copied === null || copied === undefined) continue;
    const key = seedKey(cellOf.get(x.run_id) ?? {}, seedAxes);
    const r = rates.get(key) ?? { copied: 0, n: 0 };
    r.copied += copied ? 1 : 0;
    r.n += 1;
    rates.set(key, r);
  }
  return rates;
}

function baseCannotCopy({ audit, observations, outcomes, seedAxes }: ControlCheckInput): ReportWarning | null {
  const visibleRuns = new Set(
    observations.filter((x) => x.role === 'focal' && x.visibility === 'visible').map((x) => x.run_id),
  );
  if (visibleRuns.size === 0) return null;
  const rates = baseCopyRates(audit, observations, seedAxes);
  const low = [...rates].filter(([, r]) => r.copied / r.n < BASE_COPY_FLOOR).map(([k]) => k);
  if (low.length === 0) return null;
  const runs = finished(audit, outcomes).filter(
    (r) => visibleRuns.has(r.run_id) && low.includes(seedKey(r.cell, seedAxes)),
  );
  const perSeed = [...rates]
    .sort(([a], [b]) => a.localeCompare(b, undefined, { numeric: true }))
    .map(([k, r]) => `${k} ${r.copied}/${r.n} (${Math.round((100 * r.copied) / r.n)}%)`)
    .join(', ');
  return {
    kind: 'base_cannot_copy',
    message: `visible-arm comparisons rest on a base that does not copy shown codes: base copy rate per seed (base phase, substituted probes, prefill) ${perSeed}; below ${BASE_COPY_FLOOR * 100}% for ${low.join('; ')}. There a visible-trained run is not compared with a copying model, so "visible stays at its control" cannot be read from those seeds.`,
    runs: runs.map((r) => r.run_id),
    cells: [...new Set(runs.map((r) => r.cell_id))],
  };
}

function scoresAllTied({ audit, observations, outcomes }: ControlCheckInput): ReportWarning | null {
  const cellOf = new Map(finished(audit, outcomes).map((r) => [r.run_id, r.cell_id]));
  const byCell = new Map<string, { cell: string; kind: string; values: Set<number>; n: number; runs: Set<string> }>();
  for (const x of observations) {
    const cell = cellOf.get(x.run_id);
    if (x.phase !== 'final' || cell === undefined) continue;
    const key = `${cell}\u0000${x.probe_kind}`;
    const g = byCell.get(key) ?? { cell, kind: x.probe_kind, values: new Set<number>(), n: 0, runs: new Set<string>() };
    g.values.add(x.exposure);
    g.n += 1;
    g.runs.add(x.run_id);
    byCell.set(key, g);
  }
  // The membership scores: hidden probes where the cell has them (a substituted probe whose shown
  // code always wins ties its true code at rank 2 in a healthy memorizing cell).
  const hidden = new Set([...byCell.values()].filter((g) => g.kind === 'hidden').map((g) => g.cell));
  const tied = [...byCell.values()].filter(
    (g) => g.n >= 2 && g.values.size === 1 && (g.kind === 'hidden' || !hidden.has(g.cell)),
  );
  if (tied.length === 0) return null;
  return {
    kind: 'scores_all_tied',
    message: `${tied.length} cell(s) have every canary score tied (final phase): ${listed(tied, (g) => `${g.cell}, ${g.kind} probes: all ${g.n} at ${([...g.values][0] as number).toFixed(2)} bits (${g.runs.size} run${g.runs.size === 1 ? '' : 's'})`)}. Nothing there tells inserted from held-out canaries, doses or arms apart; its intervals and ε bounds carry no information (ties are never broken in anyone's favour).`,
    runs: [...new Set(tied.flatMap((g) => [...g.runs]))],
    cells: [...new Set(tied.map((g) => g.cell))],
  };
}
