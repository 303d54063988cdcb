import type { GroupSummary } from '../metrics/aggregate.js';
import type { RunMedian } from '../metrics/arm.js';
import { bootstrapMedian, clusteredSample, type MedianInterval } from '../metrics/bootstrap.js';
import type { VarianceComponents } from '../metrics/clustered-sample.js';
import { studentTQuantile } from '../metrics/distributions.js';
import { crossedAuc, MEMBERSHIP_SCORES, membershipScore, type MembershipScore } from '../metrics/membership-score.js';
import { canaryKey, type Observation } from '../metrics/observation.js';
import { tprAtFpr, type Interval, type TprAtFpr } from '../metrics/privacy.js';
import type { ThresholdStrategy } from '../metrics/privacy-fdp.js';
import type { SpaceSummary } from '../metrics/space-check.js';
import { DASH, medianCi, num } from './format.js';
import type { LoadedAudit } from './load-audit.js';
import { largestEpsilon, type EpsilonMax } from './privacy-max.js';
import { armKey } from './arm-key.js';

/**
 * The report's "Canary designs" section (grids with a `design` axis): each design's cells side by
 * side, per context (the cell's other axes, seeds pooled): exposure of the inserted canaries and
 * of the held-out control with the report's crossed intervals over seeds, and per membership score
 * (metrics/membership-score.ts) the AUC with a crossed canary × run interval, TPR at 1% and 0.1%
 * FPR and the four ε lower bounds (largest over the cell's runs, Bonferroni over them). The
 * declared comparison between designs is in the verdicts (report/verdicts.ts, kind `design`).
 */
export interface DesignMembership {
  score: MembershipScore;
  /** Observations pooled over the cell's runs: members (inserted) and non-members (held out). */
  n_in: number;
  n_out: number;
  /** Pooled AUC with a two-way (runs × canaries) bootstrap interval. */
  auc: (Interval & { n_runs: number; n_in: number; n_out: number }) | null;
  /** Over the pooled (run, canary) observations; the Clopper–Pearson interval treats them as independent. */
  tpr_at_fpr: TprAtFpr[];
  /** Per bound, the largest over the cell's runs, each run's bound at 1 − α/k (one-run bounds: randomized inclusion only). */
  epsilon: EpsilonMax[];
}

export interface DesignRow {
  design: string;
  /** The cell's label without the design (`dose=16`), or `all runs`. */
  context: string;
  dose: number | null;
  /** The cell's arm key (`armKey`), as the verdict family names the cells a comparison rests on. */
  arm: string;
  space: SpaceSummary;
  n_runs: number;
  n_canaries: number;
  exposure: MedianInterval | null;
  held_out: MedianInterval | null;
  membership: DesignMembership[];
  /** Per run, the median exposure of this design's inserted canaries in it (runs shared by every design when together). */
  run_medians: RunMedian[];
  /**
   * Sampled spaces only (absent for an exhaustive one): extrapolated exposure beside the rank
   * exposure (`designExtrapolation`); null when the report did not extrapolate.
   */
  extrapolated?: DesignExtrapolation | null;
}

/** One arm's extrapolated exposure: the median with the interval `exposure` has, and how its fits fared. */
export interface ExtrapolatedArm {
  /**
   * Median over (run, canary) probes of the extrapolated exposure, the rank exposure standing in
   * where the fit was withheld or unfit (a floor, never a number above the ceiling from a poor
   * fit); the crossed/nested interval over canaries and seeds, as the rank exposure's.
   */
  exposure: MedianInterval | null;
  /** Probes (run × canary). */
  n: number;
  /** Fits that passed both diagnostics, were flagged (value kept, at or below the ceiling), withheld, or impossible. */
  ok: number;
  flagged: number;
  withheld: number;
  unfit: number;
  /** Reported values above the rank ceiling (all from fits that passed). */
  above_ceiling: number;
}

export interface DesignExtrapolation {
  /** log2|C|: the most a rank among the sampled candidates can show. */
  rank_ceiling: number;
  inserted: ExtrapolatedArm;
  held_out: ExtrapolatedArm | null;
}

export interface CanaryDesigns {
  probe_kind: string;
  /** true: the designs' canaries shared each run (`canaries.designs: together`); false: one run per design. */
  together: boolean;
  /** Design labels in the order the rows first show them. */
  designs: string[];
  rows: DesignRow[];
}

export interface CanaryDesignsInput {
  audit: LoadedAudit;
  groups: readonly GroupSummary[];
  observations: readonly Observation[];
  confidence: number;
  resamples: number;
  seed: number;
  delta: number;
  fprs: readonly number[];
  strategy: ThresholdStrategy;
  /** The grid's dose axis (default `dose`), for the rows' arm keys. */
  doseAxis?: string;
}

/** The design label of a group's cell; null when the audit has no design axis. */
export function designOf(cell: Record<string, unknown>): string | null {
  return typeof cell.design === 'string' ? cell.design : null;
}

/** A label without its design part. */
export function withoutDesign(label: string): string {
  return (
    label
      .split(', ')
      .filter((p) => !p.startsWith('design='))
      .join(', ') || 'all runs'
  );
}

export function canaryDesigns(input: CanaryDesignsInput): CanaryDesigns | null {
  const focal = input.groups.filter((g) => g.cohort === 'focal' && g.phase === 'final' && designOf(g.cell) !== null);
  if (focal.length === 0) return null;
  const kinds = [...new Set(focal.map((g) => g.probe_kind))];
  const kind = kinds.includes('hidden') ? 'hidden' : (kinds[0] as string);
  const groups = focal.filter((g) => g.probe_kind === kind);
  const byRun = new Map<string, Observation[]>();
  for (const o of input.observations) {
    if (o.probe_kind !== kind || (o.phase !== 'final' && o.phase !== 'base')) continue;
    if (o.role !== 'focal' && o.role !== 'held_out') continue;
    const list = byRun.get(o.run_id);
    if (list) list.push(o);
    else byRun.set(o.run_id, [o]);
  }
  const rows = groups.map((g) => designRow(g, byRun, input));
  const together = input.observations.some((o) => o.design !== undefined);
  return { probe_kind: kind, together, designs: [...new Set(rows.map((r) => r.design))], rows };
}

function designRow(g: GroupSummary, byRun: ReadonlyMap<string, Observation[]>, input: CanaryDesignsInput): DesignRow {
  const runIds = g.inserted.run_medians.map((r) => r.run_id);
  const runs = input.audit.runs.filter((r) => runIds.includes(r.run_id));
  const design = designOf(g.cell) as string;
  // Canary order: members then non-members as the first run lists them (crossed: the same in every run).
  const roleOf = new Map<string, boolean>();
  const inputs = runs.map((run) => {
    // Designs together: the run's other designs' canaries are not this row's members or non-members.
    const obs = (byRun.get(run.run_id) ?? []).filter((o) => o.design === undefined || o.design === design);
    const base = new Map(obs.filter((o) => o.phase === 'base').map((o) => [o.probe_id, o.true_score]));
    const final = obs.filter((o) => o.phase === 'final');
    for (const o of final) if (!roleOf.has(o.canary_id)) roleOf.set(o.canary_id, o.role === 'focal');
    return new Map(
      final.map((o) => [
        o.canary_id,
        {
          member: o.role === 'focal',
          input: {
            exposure: o.exposure,
            log_prob: o.true_score,
            base_log_prob: base.get(o.probe_id) ?? null,
            secret: o.code,
          },
        },
      ]),
    );
  });
  const canaries = [...roleOf.keys()];
  const member = canaries.map((c) => roleOf.get(c) as boolean);
  const membership = MEMBERSHIP_SCORES.flatMap((score): DesignMembership[] => {
    const matrix = inputs.map((run) =>
      canaries.map((c) => {
        const x = run.get(c);
        return x ? membershipScore(score, x.input) : null;
      }),
    );
    const pooled = inputs.flatMap((run, r) =>
      canaries.flatMap((c, j) => {
        const s = matrix[r]?.[j];
        return s === null || s === undefined ? [] : [{ score: s, member: run.get(c)?.member as boolean }];
      }),
    );
    if (pooled.length === 0) return [];
    const pools = runs.map((run, r) => ({
      run,
      probe_kind: g.probe_kind,
      randomized: run.manifest?.inclusion === 'randomized',
      scored: canaries.flatMap((_, j) => {
        const s = matrix[r]?.[j];
        return s === null || s === undefined ? [] : [{ score: s, member: member[j] as boolean }];
      }),
    }));
    const nIn = pooled.filter((p) => p.member).length;
    return [
      {
        score,
        n_in: nIn,
        n_out: pooled.length - nIn,
        auc: crossedAuc(matrix, member, {
          confidence: input.confidence,
          resamples: Math.min(input.resamples, 1000),
          seed: input.seed,
        }),
        tpr_at_fpr: input.fprs.flatMap((f) => tprAtFpr(pooled, f, input.confidence) ?? []),
        epsilon: largestEpsilon(
          pools.filter((p) => p.scored.some((x) => x.member) && p.scored.some((x) => !x.member)),
          input.delta,
          input.confidence,
          input.strategy,
        ),
      },
    ];
  });
  const extrapolated =
    g.space.kind === 'sampled' ? { extrapolated: designExtrapolation(g, design, runs, byRun, input) } : {};
  return {
    design,
    context: withoutDesign(g.label),
    dose: g.dose,
    arm: armKey(g.dose !== null ? { ...g.cell, [input.doseAxis ?? 'dose']: g.dose } : g.cell),
    space: g.space,
    n_runs: g.inserted.n_runs,
    n_canaries: g.inserted.n_canaries,
    exposure: g.inserted.exposure,
    held_out: g.controls.held_out?.exposure ?? null,
    membership,
    run_medians: g.inserted.run_medians,
    ...extrapolated,
  };
}

/**
 * A sampled design's extrapolated exposure (observations carry it when the report extrapolated:
 * `report --extrapolate` or the grid's `analysis.extrapolate`), for the row's inserted canaries
 * (the group's: its cohort, dose and visibility) and its held-out ones. Null when no probe of the
 * row was extrapolated.
 */
function designExtrapolation(
  g: GroupSummary,
  design: string,
  runs: readonly { run_id: string }[],
  byRun: ReadonlyMap<string, Observation[]>,
  input: CanaryDesignsInput,
): DesignExtrapolation | null {
  const final = runs.flatMap((run) =>
    (byRun.get(run.run_id) ?? []).filter((o) => o.phase === 'final' && (o.design === undefined || o.design === design)),
  );
  const inserted = final.filter(
    (o) =>
      o.role === 'focal' && (o.cohort ?? 'focal') === g.cohort && o.dose === g.dose && o.visibility === g.visibility,
  );
  if (!inserted.some((o) => o.extrapolated)) return null;
  const heldOut = final.filter((o) => o.role === 'held_out');
  return {
    rank_ceiling: g.space.ceiling,
    inserted: extrapolatedArm(inserted, `${g.key}|extrapolated`, input),
    held_out: heldOut.length > 0 ? extrapolatedArm(heldOut, `${g.key}|held_out|extrapolated`, input) : null,
  };
}

function extrapolatedArm(obs: readonly Observation[], label: string, input: CanaryDesignsInput): ExtrapolatedArm {
  const arm: ExtrapolatedArm = {
    exposure: null,
    n: obs.length,
    ok: 0,
    flagged: 0,
    withheld: 0,
    unfit: 0,
    above_ceiling: 0,
  };
  for (const o of obs) {
    // A probe without a reading (none: the report did not extrapolate it) counts as unfit.
    const x = o.extrapolated ?? { exposure: null, status: 'unfit' as const };
    arm[x.status] += 1;
    if (x.exposure !== null && x.exposure > o.exposure_ceiling) arm.above_ceiling += 1;
  }
  arm.exposure = bootstrapMedian(
    clusteredSample(
      obs.map((o) => o.extrapolated?.exposure ?? o.exposure),
      obs.map((o) => o.run_id),
      obs.map(canaryKey),
    ),
    // No upper end: reading beyond the rank ceiling is the point.
    { seed: input.seed, label, resamples: input.resamples, confidence: input.confidence, bounds: [0, Infinity] },
  );
  return arm;
}

/**
 * Designs together: `row` − `base` paired within each run, the difference of the two designs'
 * median inserted exposure in the same run, over the runs both hold. The estimate is the mean
 * of those differences, its interval Student's t over runs (df = runs − 1): the runs are the
 * units, so what a run shifts for both designs alike cancels. Null under 2 shared runs.
 * `components` give the power advice in runs (nested: the whole variance is between runs).
 */
export function pairedDesignDifference(
  row: Pick<DesignRow, 'run_medians'>,
  base: Pick<DesignRow, 'run_medians'>,
  confidence: number,
): {
  estimate: number;
  lo: number;
  hi: number;
  se: number;
  df: number;
  n_runs: number;
  components: VarianceComponents[];
} | null {
  const baseBy = new Map(base.run_medians.map((r) => [r.run_id, r]));
  const pairs = row.run_medians.flatMap((r) => {
    const b = baseBy.get(r.run_id);
    return b ? [{ d: r.median - b.median, n: Math.min(r.n, b.n) }] : [];
  });
  const k = pairs.length;
  if (k < 2) return null;
  const mean = pairs.reduce((s, p) => s + p.d, 0) / k;
  const variance = pairs.reduce((s, p) => s + (p.d - mean) ** 2, 0) / (k - 1);
  const se = Math.sqrt(variance / k);
  const half = studentTQuantile(1 - (1 - confidence) / 2, k - 1) * se;
  const canaries = pairs.reduce((s, p) => s + p.n, 0) / k;
  return {
    estimate: mean,
    lo: mean - half,
    hi: mean + half,
    se,
    df: k - 1,
    n_runs: k,
    components: [{ design: 'nested', run: se * se, canary: 0, residual: 0, runs: k, canaries }],
  };
}

/** The section in document.ts's Section shape (declared here: document.ts imports this file). */
export interface DesignsSection {
  id: string;
  title: string;
  paragraphs: string[];
  tables: { caption?: string; columns: string[]; rows: string[][] }[];
}

const SCORE_WORDS: Record<MembershipScore, string> = {
  exposure: 'exposure (rank among candidates)',
  loss: 'loss (log-probability of the secret)',
  reference_ratio: 'reference ratio (log-probability − base model’s)',
  zlib_ratio: 'zlib ratio (log-probability / zlib bytes)',
};

/** The section of the report document; null for audits without a design axis. */
export function canaryDesignsSection(d: CanaryDesigns | null | undefined): DesignsSection | null {
  if (!d || d.rows.length === 0) return null;
  const ci = (i: { estimate: number; lo: number; hi: number } | null): string =>
    i ? `${num(i.estimate)} [${num(i.lo)}, ${num(i.hi)}]` : DASH;
  const eps = (m: DesignMembership, bound: EpsilonMax['bound']): string => {
    const e = m.epsilon.find((x) => x.bound === bound);
    return e ? num(e.epsilon) : DASH;
  };
  const tpr = (m: DesignMembership, f: number): string => {
    const t = m.tpr_at_fpr.find((x) => x.fpr === f);
    return t
      ? `${t.k}/${t.n} (${num(t.tpr)}) [${num(t.lo)}, ${num(t.hi)}]; FPR ${num(t.achieved_fpr, 3)} (resolution ${num(t.resolution, 3)})`
      : DASH;
  };
  const sampled = d.rows.filter((r) => r.extrapolated !== undefined);
  const extrapolated = sampled.filter((r) => r.extrapolated);
  const sampledDesigns = [...new Set(sampled.map((r) => r.design))].join(', ');
  const fits = (a: ExtrapolatedArm | null | undefined): string =>
    a ? `${a.ok} · ${a.flagged} · ${a.withheld} · ${a.unfit} of ${a.n}` : DASH;
  const extrapolation: DesignsSection['paragraphs'] =
    sampled.length === 0
      ? []
      : extrapolated.length === 0
        ? [
            `Extrapolated exposure (beyond the rank ceiling of the sampled designs: ${sampledDesigns}) was not computed: run \`canary-audit report AUDIT --extrapolate\` or set the grid's \`analysis.extrapolate: true\` (docs/metrics.md, Extrapolated exposure).`,
          ]
        : [
            `Extrapolated exposure (sampled designs: ${sampledDesigns}; docs/metrics.md, Extrapolated exposure): a skew-normal fitted to each probe's decoy scores, the true secret's score read from its tail, so it can go beyond the rank ceiling log2|C|. Median with the same crossed interval as the rank exposure; a probe whose fit failed its diagnostics above the ceiling (withheld) or could not be fitted enters at its rank exposure, so a poor fit never shows above the ceiling. Read values above the ceiling as rough and likely low.`,
          ];
  return {
    id: 'canary-designs',
    title: 'Canary designs',
    paragraphs: [
      `Designs side by side (${d.designs.join(', ')}; ${d.probe_kind} probes, final model, seeds pooled). ${
        d.together
          ? 'The designs were together: each run held every design’s canaries (the canaries split among the designs by draw order, each design its own inserted and held-out ones), so the designs share every run and their comparison is paired within runs.'
          : 'The designs were in separate runs: at one seed the designs’ runs train the same background rows with the same canary identities at the same positions, and differ in the secrets only.'
      } Exposure: median with the report's crossed interval over canaries and seeds; each design's ceiling is log2|C| of its own candidate space.`,
      'Membership scores (docs/metrics.md, Canary designs): members are the inserted canaries, non-members the held-out ones. AUC: pooled over the runs, interval from a two-way bootstrap over runs and canaries. TPR at FPR: pooled (run, canary) observations, Clopper–Pearson interval as if independent. ε ≥: the largest of the cell’s per-run bounds at δ = 1e-5, each at 1 − α/k (Bonferroni over the k runs); one-run bounds only where inclusion was randomized.',
      ...extrapolation,
    ],
    tables: [
      {
        caption: 'Exposure by design',
        columns: [
          'Context',
          'Dose',
          'Design',
          'Candidates',
          'Inserted exposure [95% CI]',
          'Held-out exposure [95% CI]',
          'n',
        ],
        rows: d.rows.map((r) => [
          r.context,
          r.dose === null ? DASH : String(r.dose),
          r.design,
          `${r.space.kind} ${r.space.size} (ceiling ${num(r.space.ceiling)})`,
          medianCi(r.exposure),
          medianCi(r.held_out),
          `${r.n_canaries} canaries · ${r.n_runs} runs`,
        ]),
      },
      ...(extrapolated.length === 0
        ? []
        : [
            {
              caption: 'Extrapolated exposure by design (sampled spaces)',
              columns: [
                'Context',
                'Dose',
                'Design',
                'Rank ceiling',
                'Inserted rank exposure [95% CI]',
                'Inserted extrapolated [95% CI]',
                'Held-out extrapolated [95% CI]',
                'Fits ok · flagged · withheld · unfit (inserted)',
                'Above ceiling',
              ],
              rows: extrapolated.map((r) => {
                const x = r.extrapolated as DesignExtrapolation;
                return [
                  r.context,
                  r.dose === null ? DASH : String(r.dose),
                  r.design,
                  num(x.rank_ceiling),
                  medianCi(r.exposure),
                  medianCi(x.inserted.exposure),
                  medianCi(x.held_out?.exposure ?? null),
                  fits(x.inserted),
                  `${x.inserted.above_ceiling} of ${x.inserted.n}`,
                ];
              }),
            },
          ]),
      {
        caption: 'Membership by design and score',
        columns: [
          'Context',
          'Dose',
          'Design',
          'Score',
          'n in · out',
          'AUC [95% CI]',
          'TPR @ 1% FPR',
          'TPR @ 0.1% FPR',
          'ε ≥ (Clopper–Pearson)',
          'ε ≥ (GDP)',
          'ε ≥ (one run)',
          'ε ≥ (f-DP one run)',
        ],
        rows: d.rows.flatMap((r) =>
          r.membership.map((m) => [
            r.context,
            r.dose === null ? DASH : String(r.dose),
            r.design,
            SCORE_WORDS[m.score],
            `${m.n_in} · ${m.n_out}`,
            ci(m.auc),
            tpr(m, 0.01),
            tpr(m, 0.001),
            eps(m, 'clopper_pearson'),
            eps(m, 'gdp'),
            eps(m, 'one_run'),
            eps(m, 'fdp_one_run'),
          ]),
        ),
      },
    ],
  };
}
