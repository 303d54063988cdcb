import type { GroupSummary } from '../metrics/aggregate.js';
import type { DifferenceInterval, MedianInterval, VarianceComponents } from '../metrics/bootstrap.js';
import { formatValue } from '../metrics/cells.js';
import { armKey } from './arm-key.js';
import { studentTQuantile } from '../metrics/distributions.js';
import type { PairedSummary } from '../metrics/paired.js';
import {
  holmAdjust,
  powerAdvice,
  readVerdict,
  spreadOf,
  testSpread,
  type PowerAdvice,
  type Spread,
  type VerdictKind,
} from '../metrics/verdict.js';
import { num, signed } from './format.js';
import { pairedDesignDifference, type CanaryDesigns } from './canary-designs.js';

/** What the verdicts read of a report summary (summary.ts's ReportSummary has these fields). */
export interface VerdictInput {
  groups: GroupSummary[];
  /** Grids with a design axis: the designs side by side, read for the `design` comparisons. */
  canary_designs?: CanaryDesigns;
  paired: PairedSummary[];
  audit: { axes: { name: string; values: unknown[]; role: 'seed' | 'dose' | 'axis' }[] };
  settings: { confidence: number; dose_axis: string; seed_axes?: string[] };
}

export { armKey } from './arm-key.js';

/**
 * The declared family of an audit and a verdict for each member (the tests: metrics/verdict.ts).
 * The family is the comparisons the grid was built for, as the findings name them: per visibility,
 * inserted vs its control at the highest dose (`control`) and the lowest vs the highest dose
 * (`dose`); per compared axis, the paired difference at the highest dose (`paired`). A grid with a
 * design axis (separate or together) declares the dose and paired comparisons once per design.
 * Copy rates of substituted probes are described, not tested.
 */
export const DEFAULT_MARGIN_BITS = 1;
export const ADJUSTMENT = 'holm';

export interface ComparisonReading {
  verdict: VerdictKind;
  within_margin: boolean;
  p_difference: number;
  p_equivalence: number;
}

export interface ComparisonVerdict {
  kind: 'control' | 'dose' | 'paired' | 'design';
  /** What is compared, in words (`redacted, dose 16: inserted − held-out control`). */
  comparison: string;
  probe_kind: string;
  /** The plain sentence the Findings box and `run` lead with. */
  sentence: string;
  /** The difference (bits) with its interval at the report's level, its se and df (df null: normal, one run per arm). */
  estimate: number;
  lo: number;
  hi: number;
  se: number;
  df: number | null;
  n_runs: number;
  n_canaries: number;
  /** One run per arm: the interval covers canary sampling only. */
  one_run: boolean;
  margin_bits: number;
  alpha: number;
  /** The reading of this comparison alone. */
  unadjusted: ComparisonReading;
  /** The reading after the family adjustment (`adjustment`) over `family_size` comparisons. */
  adjusted: ComparisonReading;
  adjustment: typeof ADJUSTMENT;
  family_size: number;
  /**
   * An undecided comparison (unadjusted) with variance components: the probability of a decision
   * at the observed effect, and the runs (per arm, canaries unchanged) and canaries (per run, runs
   * unchanged) that would decide it with 80% probability (null: not within 64×). Null otherwise.
   */
  power: {
    probability: number;
    runs: number | null;
    canaries: number | null;
    more_runs: number | null;
    both: { runs: number; canaries: number } | null;
  } | null;
}

interface Member {
  kind: ComparisonVerdict['kind'];
  comparison: string;
  probe_kind: string;
  /** `Redacted training at dose 16`, and the verbs for each verdict. */
  subject: string;
  verbs: Record<VerdictKind, string>;
  interval: Pick<DifferenceInterval, 'estimate' | 'lo' | 'hi' | 'se' | 'df'>;
  spread: Spread;
  components: VarianceComponents[];
  n_runs: number;
  n_canaries: number;
  nText: string;
  one_run: boolean;
  /** The arms (armKey) the comparison rests on. */
  arms: string[];
}

function capitalize(s: string): string {
  return s.charAt(0).toUpperCase() + s.slice(1);
}

function plural(n: number, one: string, many: string): string {
  return `${n} ${n === 1 ? one : many}`;
}

function mainKind(groups: GroupSummary[]): string | null {
  const kinds = [...new Set(groups.map((g) => g.probe_kind))];
  return kinds.includes('hidden') ? 'hidden' : (kinds[0] ?? null);
}

/** ` (placement early, population single)`: the label's axes other than visibility and dose, in words. */
function otherAxes(label: string): string {
  const parts = label
    .split(', ')
    .filter((p) => p.includes('=') && !/^(visibility|dose)=/.test(p))
    .map((p) => p.replace('=', ' '));
  return parts.length > 0 ? ` (${parts.join(', ')})` : '';
}

/** A group's arm: its cell (seed and numeric dose left out by the grouping) with the dose put back. */
function groupArm(g: GroupSummary, doseAxis: string): string {
  return armKey(g.dose !== null ? { ...g.cell, [doseAxis]: g.dose } : g.cell);
}

function controlMember(g: GroupSummary, alpha: number, doseAxis: string): Member | null {
  const [name, control] = g.controls.held_out
    ? ['the held-out control', g.controls.held_out]
    : g.controls.base
      ? ['the base model', g.controls.base]
      : g.controls.no_canary
        ? ['a no-canary run', g.controls.no_canary]
        : [null, null];
  const d = control?.difference;
  if (!name || !d) return null;
  const who = `${g.visibility !== null ? capitalize(g.visibility) : 'Inserting canaries'}${g.visibility !== null ? ' training' : ''}${g.dose !== null ? ` at dose ${g.dose}` : ''}${otherAxes(g.label)}`;
  const runs = g.inserted.n_runs;
  return {
    kind: 'control',
    comparison: `${g.label}, ${g.probe_kind} probes: inserted − ${name.replace(/^the |^a /, '')}`,
    probe_kind: g.probe_kind,
    subject: who,
    verbs: {
      higher: `raised exposure above ${name}`,
      lower: `left exposure below ${name}`,
      equivalent: `left exposure within ±MARGIN of ${name}`,
      undecided: `is not yet told apart from ${name}`,
    },
    interval: d,
    spread: spreadOf(d, alpha),
    components: d.components ?? [],
    n_runs: runs,
    n_canaries: g.inserted.n_canaries,
    nText: `${plural(runs, 'run', 'runs')} × ${plural(g.inserted.n_canaries, 'canary', 'canaries')}`,
    one_run: d.resampling === 'flat',
    arms: [groupArm(g, doseAxis)],
  };
}

/**
 * Welch: two medians of different cells (different runs) as a difference high − low with the
 * summed variance and Welch–Satterthwaite df (a percentile side read as normal: df Infinity).
 */
export function welchDifference(
  high: MedianInterval,
  low: MedianInterval,
  alpha: number,
): { interval: Member['interval']; spread: Spread } {
  const a = spreadOf(high, alpha);
  const b = spreadOf(low, alpha);
  const variance = a.se * a.se + b.se * b.se;
  const denominator = (Number.isFinite(a.df) ? a.se ** 4 / a.df : 0) + (Number.isFinite(b.df) ? b.se ** 4 / b.df : 0);
  const df = denominator > 0 ? (variance * variance) / denominator : Infinity;
  const spread = { estimate: high.estimate - low.estimate, se: Math.sqrt(variance), df };
  const half = spread.se * studentTQuantile(1 - alpha / 2, df);
  return {
    interval: {
      estimate: spread.estimate,
      lo: spread.estimate - half,
      hi: spread.estimate + half,
      se: spread.se,
      df: Number.isFinite(df) ? df : null,
    },
    spread,
  };
}

function doseMember(
  low: GroupSummary,
  high: GroupSummary,
  paired: PairedSummary | undefined,
  doseAxis: string,
  alpha: number,
): Member | null {
  const context = low.visibility !== null ? ` (${low.visibility})` : '';
  const base = {
    kind: 'dose' as const,
    comparison: `${low.label.replace(/(, )?dose=[^,]*/, '') || 'all runs'}, ${low.probe_kind} probes: dose ${high.dose} − dose ${low.dose}`,
    probe_kind: low.probe_kind,
    subject: `Raising the dose from ${low.dose} to ${high.dose}${context}${otherAxes(low.label)}`,
    verbs: {
      higher: 'raised exposure',
      lower: 'lowered exposure',
      equivalent: 'changed exposure by less than ±MARGIN',
      undecided: 'has not yet shown a change in exposure',
    },
    arms: [groupArm(low, doseAxis), groupArm(high, doseAxis)],
  };
  if (paired && paired.axis === doseAxis) {
    return {
      ...base,
      interval: paired.difference,
      spread: spreadOf(paired.difference, alpha),
      components: paired.difference.components ?? [],
      n_runs: paired.n_run_pairs,
      n_canaries: paired.n_canaries,
      nText: `${plural(paired.n_run_pairs, 'run pair', 'run pairs')} × ${plural(paired.n_canaries, 'canary', 'canaries')}, paired`,
      one_run: paired.difference.resampling === 'flat',
    };
  }
  const h = high.inserted.exposure;
  const l = low.inserted.exposure;
  if (!h || !l) return null;
  const { interval, spread } = welchDifference(h, l, alpha);
  return {
    ...base,
    interval,
    spread,
    components: [...(h.components ?? []), ...(l.components ?? [])],
    n_runs: Math.min(high.inserted.n_runs, low.inserted.n_runs),
    n_canaries: Math.min(high.inserted.n_canaries, low.inserted.n_canaries),
    nText: `${high.inserted.n_runs} + ${plural(low.inserted.n_runs, 'run', 'runs')}, ${high.inserted.n_canaries} + ${plural(low.inserted.n_canaries, 'canary', 'canaries')}`,
    one_run: h.resampling === 'flat' && l.resampling === 'flat',
  };
}

function pairedMember(p: PairedSummary, varying: ReadonlySet<string>, alpha: number): Member {
  const context = Object.entries(p.context)
    .filter(([axis]) => varying.has(axis))
    .map(([axis, value]) => `${axis} ${formatValue(value)}`)
    .join(', ');
  const what = `${capitalize(p.axis)} ${formatValue(p.from)} → ${formatValue(p.to)}${context ? ` (${context})` : ''}`;
  return {
    kind: 'paired',
    comparison: `${p.label === '(all runs)' ? '' : `${p.label}, `}${p.probe_kind} probes: ${p.axis} ${formatValue(p.to)} − ${formatValue(p.from)}, paired`,
    probe_kind: p.probe_kind,
    subject: what,
    verbs: {
      higher: 'raised exposure',
      lower: 'lowered exposure',
      equivalent: 'changed exposure by less than ±MARGIN',
      undecided: 'has not yet shown a change in exposure',
    },
    interval: p.difference,
    spread: spreadOf(p.difference, alpha),
    components: p.difference.components ?? [],
    n_runs: p.n_run_pairs,
    n_canaries: p.n_canaries,
    nText: `${plural(p.n_run_pairs, 'run pair', 'run pairs')} × ${plural(p.n_canaries, 'canary', 'canaries')}, paired`,
    one_run: p.difference.resampling === 'flat',
    arms: [armKey({ ...p.context, [p.axis]: p.from }), armKey({ ...p.context, [p.axis]: p.to })],
  };
}

/** The family's members, in the findings' order. */
function members(s: VerdictInput, alpha: number): Member[] {
  const groups = s.groups.filter((g) => g.cohort === 'focal' && g.phase === 'final');
  const kind = mainKind(groups);
  if (kind === null) return [];
  const main = groups.filter((g) => g.probe_kind === kind);
  const doseAxis = s.settings.dose_axis;
  const paired = s.paired.filter((p) => p.cohort === 'focal' && p.phase === 'final' && p.probe_kind === kind);
  const out: Member[] = [];
  const byVisibility = new Map<string, GroupSummary[]>();
  for (const g of main) byVisibility.set(g.visibility ?? '', [...(byVisibility.get(g.visibility ?? '') ?? []), g]);
  // Designs whose dose comparison is declared (null: a grid without a design axis).
  const doseCovered = new Set<string | null>();
  const designKey = (cell: Record<string, unknown>): string | null =>
    typeof cell.design === 'string' ? cell.design : null;
  for (const list of byVisibility.values()) {
    const withDose = list.filter((g) => g.dose !== null).sort((a, b) => (a.dose as number) - (b.dose as number));
    const doses = [...new Set(withDose.map((g) => g.dose))];
    const top = withDose.length > 0 ? withDose.filter((g) => g.dose === doses[doses.length - 1]) : list;
    for (const g of top) {
      const m = controlMember(g, alpha, doseAxis);
      if (m) out.push(m);
    }
    // The lowest dose against the highest in the same cell otherwise (placement, schedule, …): a
    // low-dose cell with no high-dose twin is not compared with another cell's high dose. One per
    // design: each design (separate cells, or together in one run) gets its own dose comparison.
    const otherAxes = (g: GroupSummary): string =>
      JSON.stringify(Object.entries(g.cell).filter(([axis]) => axis !== doseAxis && axis !== 'dose'));
    const sameCell = (a: GroupSummary, b: GroupSummary): boolean => otherAxes(a) === otherAxes(b);
    const allTwins = withDose
      .filter((g) => g.dose === doses[0])
      .map((lo) => [lo, withDose.find((g) => g.dose === doses[doses.length - 1] && sameCell(g, lo))] as const)
      .filter((t): t is readonly [GroupSummary, GroupSummary] => t[1] !== undefined);
    const firstPerDesign = allTwins.filter(
      ([lo], i) => allTwins.findIndex(([other]) => designKey(other.cell) === designKey(lo.cell)) === i,
    );
    for (const [low, high] of doses.length > 1 ? firstPerDesign : []) {
      const match = paired.find(
        (p) =>
          p.axis === doseAxis &&
          p.from === low.dose &&
          p.to === high.dose &&
          (low.visibility === null || p.context.visibility === low.visibility) &&
          (p.context.design === undefined || p.context.design === low.cell.design),
      );
      const m = doseMember(low, high, match, doseAxis, alpha);
      if (m) {
        out.push(m);
        doseCovered.add(designKey(low.cell));
      }
    }
  }
  const varying = new Set(s.audit.axes.filter((a) => a.values.length > 1 && a.role !== 'seed').map((a) => a.name));
  for (const axis of [...new Set(paired.map((p) => p.axis))]) {
    const list = paired.filter((p) => p.axis === axis).sort((a, b) => (b.dose ?? 0) - (a.dose ?? 0));
    // The highest dose's paired difference, once per design (a grid without a design axis: once).
    const designs = [...new Set(list.map((p) => designKey(p.context)))];
    for (const design of designs) {
      if (axis === doseAxis && doseCovered.has(design)) continue;
      const first = list.find((p) => designKey(p.context) === design);
      if (first) out.push(pairedMember(first, varying, alpha));
    }
  }
  out.push(...designMembers(s.canary_designs, alpha));
  return out;
}

/**
 * The declared comparison between canary designs: at the highest dose, each design's inserted
 * exposure against the first design's (the grid's first listed, usually codes), as a Welch
 * difference of the two cells' medians with their crossed intervals. The designs' cells share
 * seeds, rows and identities but not secrets, so canaries do not pair and the Welch difference
 * ignores the seed pairing (conservative). Designs together in one run (`canaries.designs:
 * together`) are compared paired within each run instead (`pairedDesignDifference`: the mean of
 * the per-run differences of medians, Student's t over runs), once two or more runs hold both.
 * Designs whose candidate spaces differ in size are on different exposure scales and are not compared.
 */
function designMembers(d: CanaryDesigns | undefined, alpha: number): Member[] {
  if (!d || d.designs.length < 2) return [];
  const doses = d.rows.flatMap((r) => (r.dose === null ? [] : [r.dose]));
  const top = doses.length > 0 ? Math.max(...doses) : null;
  const rows = d.rows.filter((r) => r.dose === top);
  const out: Member[] = [];
  for (const context of [...new Set(rows.map((r) => r.context))]) {
    const here = rows.filter((r) => r.context === context);
    const base = here.find((r) => r.design === d.designs[0]);
    if (!base?.exposure) continue;
    for (const r of here) {
      if (r === base || !r.exposure || r.space.size !== base.space.size) continue;
      const where = [context === 'all runs' ? null : context, top === null ? null : `dose ${top}`]
        .filter((x) => x !== null)
        .join(', ');
      const paired = d.together ? pairedDesignDifference(r, base, 1 - alpha) : null;
      if (paired) {
        out.push({
          ...designVerbs(d.probe_kind, r.design, base.design, where),
          comparison: `${where || context}, ${d.probe_kind} probes: design ${r.design} − ${base.design}, paired within runs`,
          interval: paired,
          spread: spreadOf(paired, alpha),
          components: paired.components,
          arms: [r.arm, base.arm],
          n_runs: paired.n_runs,
          n_canaries: Math.min(r.n_canaries, base.n_canaries),
          nText: `${plural(paired.n_runs, 'run', 'runs')} holding both designs, ${r.n_canaries} + ${plural(base.n_canaries, 'canary', 'canaries')}, paired within runs`,
          one_run: false,
        });
        continue;
      }
      const { interval, spread } = welchDifference(r.exposure, base.exposure, alpha);
      out.push({
        ...designVerbs(d.probe_kind, r.design, base.design, where),
        comparison: `${where || context}, ${d.probe_kind} probes: design ${r.design} − ${base.design}`,
        interval,
        spread,
        components: [...(r.exposure.components ?? []), ...(base.exposure.components ?? [])],
        arms: [r.arm, base.arm],
        n_runs: Math.min(r.n_runs, base.n_runs),
        n_canaries: Math.min(r.n_canaries, base.n_canaries),
        nText: `${r.n_runs} + ${plural(base.n_runs, 'run', 'runs')}, ${r.n_canaries} + ${plural(base.n_canaries, 'canary', 'canaries')}`,
        one_run: r.exposure.resampling === 'flat' && base.exposure.resampling === 'flat',
      });
    }
  }
  return out;
}

function designVerbs(
  probeKind: string,
  design: string,
  base: string,
  where: string,
): Pick<Member, 'kind' | 'probe_kind' | 'subject' | 'verbs'> {
  return {
    kind: 'design',
    probe_kind: probeKind,
    subject: `The ${design} design${where ? ` (${where})` : ''}`,
    verbs: {
      higher: `gave higher exposure than ${base}`,
      lower: `gave lower exposure than ${base}`,
      equivalent: `gave exposure within ±MARGIN of ${base}`,
      undecided: `is not yet told apart from ${base}`,
    },
  };
}

/** What power planning needs of each declared comparison: its name, observed effect and variance components. */
export interface FamilyMember {
  kind: ComparisonVerdict['kind'];
  comparison: string;
  estimate: number;
  components: VarianceComponents[];
  one_run: boolean;
  /** The arms (armKey) it rests on: sequential replicates add seeds to these while it is undecided. */
  arms: string[];
}

/** The declared family of a computed report (`plan --power --pilot`), in the findings' order. */
export function declaredFamily(s: VerdictInput): FamilyMember[] {
  return members(s, 1 - s.settings.confidence).map((m) => ({
    kind: m.kind,
    comparison: m.comparison,
    estimate: m.spread.estimate,
    components: m.components,
    one_run: m.one_run,
    arms: m.arms,
  }));
}

function reading(
  estimate: number,
  p: { p_difference: number; p_equivalence: number },
  alpha: number,
): ComparisonReading {
  return {
    ...readVerdict({ estimate }, p.p_difference <= alpha, p.p_equivalence <= alpha),
    p_difference: p.p_difference,
    p_equivalence: p.p_equivalence,
  };
}

function status(r: ComparisonReading, margin: number): string {
  if (r.verdict === 'undecided') return 'undecided';
  if (r.verdict === 'equivalent') return `decided: equivalent within ±${num(margin)} bits`;
  return r.within_margin ? `decided, and smaller than ±${num(margin)} bits` : 'decided';
}

/**
 * The power hint of an undecided comparison, in the design's own units: runs of the cell (runs per
 * arm for a dose or paired comparison), and focal canaries per run as `canaries.focal` sets them,
 * named beside the design's count and left out when they stay as they are. One case each: more
 * runs alone; more canaries alone (no more runs); both, when neither alone reaches 80%; neither,
 * within 64× the runs and 64× the canaries.
 */
export function powerHint(
  power: NonNullable<ComparisonVerdict['power']>,
  at: { runs: number; canaries: number },
  kind: ComparisonVerdict['kind'],
): string {
  const runs = (n: number): string => `${n === 1 ? 'run' : 'runs'}${kind === 'control' ? '' : ' per arm'}`;
  const canaries = (n: number): string =>
    `${plural(n, 'focal canary', 'focal canaries')} per run (the design has ${at.canaries})`;
  if (power.more_runs !== null && power.runs !== null)
    return `≈${power.more_runs} more ${runs(power.more_runs)} (${power.runs} in all) would decide (80%)`;
  if (power.canaries !== null) return `≈${canaries(power.canaries)}, with no more runs, would decide (80%)`;
  if (power.both) {
    const more = power.both.runs - at.runs;
    const withCanaries = power.both.canaries === at.canaries ? '' : ` and ${canaries(power.both.canaries)}`;
    return `≈${more} more ${runs(more)} (${power.both.runs} in all)${withCanaries} would decide (80%); neither alone would`;
  }
  return `not decidable at this effect within ${64 * at.runs} ${runs(2)} and ${64 * at.canaries} focal canaries per run (64× each)`;
}

/**
 * Verdicts of the declared family at the report's level (α = 1 − confidence), with the margin
 * `marginBits` for equivalence, the family adjusted together, and power for undecided ones.
 */
export function verdicts(
  s: VerdictInput,
  marginBits = DEFAULT_MARGIN_BITS,
  /** Only these comparisons (by `comparison`) form the family: a sequential look reads the open ones. */
  only?: ReadonlySet<string>,
): ComparisonVerdict[] {
  const alpha = 1 - s.settings.confidence;
  const list = members(s, alpha).filter((m) => !only || only.has(m.comparison));
  const tested = list.map((m) => testSpread(m.spread, marginBits));
  const adjusted = holmAdjust(tested);
  return list.map((m, i) => {
    const t = tested[i] as (typeof tested)[number];
    const unadjusted = reading(m.spread.estimate, t, alpha);
    const adj = reading(m.spread.estimate, adjusted[i] as { p_difference: number; p_equivalence: number }, alpha);
    let power: ComparisonVerdict['power'] = null;
    let hint = '';
    if (unadjusted.verdict === 'undecided' && m.components.length > 0) {
      const advice = powerAdvice(m.spread.estimate, m.components, marginBits, alpha) as PowerAdvice;
      power = {
        probability: advice.probability,
        runs: advice.runs,
        canaries: advice.canaries,
        more_runs: advice.runs === null ? null : advice.runs - advice.at.runs,
        both: advice.both,
      };
      hint = `, ${powerHint(power, advice.at, m.kind)}`;
    }
    const verb = m.verbs[unadjusted.verdict].replace('MARGIN', `${num(marginBits)} bits`);
    const i95 = `${signed(m.interval.estimate)} [${signed(m.interval.lo)}, ${signed(m.interval.hi)}] bits`;
    const oneRun = m.one_run
      ? `; one run per arm: a rerun can fall outside this interval${unadjusted.verdict === 'undecided' ? ' (add seeds to learn how many runs would decide it)' : ''}`
      : '';
    const family =
      list.length > 1
        ? `; ${adj.verdict === unadjusted.verdict && adj.within_margin === unadjusted.within_margin ? 'the same' : status(adj, marginBits)} after Holm over ${list.length} comparisons`
        : '';
    const sentence = `${m.subject} ${verb}: ${i95}, ${status(unadjusted, marginBits)}${hint}${family}; ${m.nText}${oneRun}.`;
    return {
      kind: m.kind,
      comparison: m.comparison,
      probe_kind: m.probe_kind,
      sentence,
      estimate: m.interval.estimate,
      lo: m.interval.lo,
      hi: m.interval.hi,
      se: m.spread.se,
      df: Number.isFinite(m.spread.df) ? m.spread.df : null,
      n_runs: m.n_runs,
      n_canaries: m.n_canaries,
      one_run: m.one_run,
      margin_bits: marginBits,
      alpha,
      unadjusted,
      adjusted: adj,
      adjustment: ADJUSTMENT,
      family_size: list.length,
      power,
    };
  });
}
