import { clopperPearson } from '../metrics/distributions.js';
import { formatValue } from '../metrics/cells.js';
import type { Observation } from '../metrics/observation.js';
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
 * - `null_broken`: canaries that were never inserted score apart from each other — the no-canary
 *   control's would-be focal canaries against its held-out ones, or (without that control) two
 *   halves of each run's held-out canaries: an ε lower bound above 0 or a TPR at 1% FPR whose
 *   interval lies above the FPR's, at a level split over every null comparison made (Bonferroni).
 * - `base_cannot_copy`: the grid has a visible arm and some seed's base does not copy a code it is
 *   shown (base phase, substituted probes, fewer than half copied): the visible arm's "stays at its
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

/** A copy rate below this (per seed, base phase) means the base does not copy shown codes. */
export const BASE_COPY_FLOOR = 0.5;
/** The FPR of the null comparison's TPR check. */
export const NULL_FPR = 0.01;
/** Messages list this many runs or cells, then "…". */
const LIST = 4;

export function controlWarnings(input: ControlCheckInput): ReportWarning[] {
  return [weightsUnchanged(input), nullBroken(input), baseCannotCopy(input), scoresAllTied(input)].flatMap((w) => (w ? [w] : []));
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
  run: LoadedRun;
  what: string;
  scored: ScoredCanary[];
}

/**
 * The null comparisons of an audit: per no-canary run, its would-be focal canaries ("members")
 * against its held-out ones; without any, per run, the held-out canaries split in two by sorted id
 * (even positions "members"), which no order of the input can change.
 */
export function nullComparisons(audit: LoadedAudit, observations: readonly Observation[], outcomes: ReadonlyMap<string, RunOutcome>): NullComparison[] {
  const byRun = membershipObservations(observations);
  const runs = finished(audit, outcomes);
  const noCanary = runs.flatMap((run) => {
    const xs = byRun.get(run.run_id) ?? [];
    const scored = xs.filter((x) => x.role === 'no_canary' || x.role === 'held_out').map((x) => ({ score: x.exposure, member: x.role === 'no_canary' }));
    return scored.some((c) => c.member) && scored.some((c) => !c.member) ? [{ run, what: 'no-canary control: would-be focal vs held-out canaries', scored }] : [];
  });
  if (noCanary.length > 0) return noCanary;
  return runs.flatMap((run) => {
    const held = (byRun.get(run.run_id) ?? []).filter((x) => x.role === 'held_out');
    const ids = [...new Set(held.map((x) => x.canary_id))].sort();
    if (ids.length < 4) return [];
    const first = new Set(ids.filter((_, i) => i % 2 === 0));
    return [{ run, what: 'two halves of the held-out canaries', scored: held.map((x) => ({ score: x.exposure, member: first.has(x.canary_id) })) }];
  });
}

function nullBroken({ audit, observations, outcomes, confidence, delta }: ControlCheckInput): ReportWarning | null {
  const comparisons = nullComparisons(audit, observations, outcomes);
  if (comparisons.length === 0) return null;
  // One family: each comparison at 1 − α/k, so a healthy audit raises it with probability ≤ α.
  const each = 1 - (1 - confidence) / comparisons.length;
  const broken = comparisons.flatMap((c) => {
    const eps = clopperPearsonEpsilon(c.scored, delta, each);
    const tpr = tprAtFpr(c.scored, NULL_FPR, each);
    const nOut = c.scored.filter((x) => !x.member).length;
    const fprHi = tpr ? clopperPearson(Math.round(tpr.achieved_fpr * nOut), nOut, each).hi : 1;
    const epsBroken = eps !== null && eps.epsilon > 0;
    const tprBroken = tpr !== null && tpr.lo > fprHi;
    if (!epsBroken && !tprBroken) return [];
    const why = [
      epsBroken ? `ε ≥ ${(eps as { epsilon: number }).epsilon.toFixed(2)} at δ = ${delta}` : null,
      tprBroken && tpr ? `TPR at ${NULL_FPR * 100}% FPR ${tpr.k}/${tpr.n} (interval from ${tpr.lo.toFixed(2)}) above the FPR's interval (to ${fprHi.toFixed(2)})` : null,
    ].filter(Boolean);
    return [{ c, why: why.join(', ') }];
  });
  if (broken.length === 0) return null;
  const level = `${(each * 100).toPrecision(4)}% each (${Math.round(confidence * 100)}% over ${comparisons.length} null comparison${comparisons.length === 1 ? '' : 's'}, Bonferroni)`;
  return {
    kind: 'null_broken',
    message: `the audit's null is broken: canaries that were never inserted score apart from each other in ${broken.length} of ${comparisons.length} null comparison(s) — ${listed(broken, ({ c, why }) => `${c.run.run_id} (${c.run.cell_id}, ${c.what}): ${why}`)}; at ${level}. A focal-vs-control difference may then come from the canaries' codes or the scoring, not from training.`,
    runs: broken.map((b) => b.c.run.run_id),
    cells: [...new Set(broken.map((b) => b.c.run.cell_id))],
  };
}

function seedKey(cell: Record<string, unknown>, seedAxes: readonly string[]): string {
  const parts = seedAxes.filter((a) => cell[a] !== undefined && cell[a] !== null).map((a) => `${a}=${formatValue(cell[a])}`);
  return parts.length > 0 ? parts.join(', ') : '(all runs)';
}

/** Per seed: how many substituted probes the base model (phase base, prefill) answered with the shown code. */
export function baseCopyRates(audit: LoadedAudit, observations: readonly Observation[], seedAxes: readonly string[]): Map<string, { copied: number; n: number }> {
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
  const visibleRuns = new Set(observations.filter((x) => x.role === 'focal' && x.visibility === 'visible').map((x) => x.run_id));
  if (visibleRuns.size === 0) return null;
  const rates = baseCopyRates(audit, observations, seedAxes);
  const low = [...rates].filter(([, r]) => r.copied / r.n < BASE_COPY_FLOOR).map(([k]) => k);
  if (low.length === 0) return null;
  const runs = finished(audit, outcomes).filter((r) => visibleRuns.has(r.run_id) && low.includes(seedKey(r.cell, seedAxes)));
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
  const tied = [...byCell.values()].filter((g) => g.n >= 2 && g.values.size === 1 && (g.kind === 'hidden' || !hidden.has(g.cell)));
  if (tied.length === 0) return null;
  return {
    kind: 'scores_all_tied',
    message: `${tied.length} cell(s) have every canary score tied (final phase): ${listed(tied, (g) => `${g.cell}, ${g.kind} probes: all ${g.n} at ${([...g.values][0] as number).toFixed(2)} bits (${g.runs.size} run${g.runs.size === 1 ? '' : 's'})`)}. Nothing there tells inserted from held-out canaries, doses or arms apart; its intervals and ε bounds carry no information (ties are never broken in anyone's favour).`,
    runs: [...new Set(tied.flatMap((g) => [...g.runs]))],
    cells: [...new Set(tied.map((g) => g.cell))],
  };
}
