import type { AuditPlan } from '../manifest/index.js';
import type { VarianceComponents } from '../metrics/bootstrap.js';
import { DEFAULT_SPENDING, lookSchedule, type SpendingFunction } from '../metrics/sequential.js';
import { sequentialPower, type SequentialPower } from '../metrics/sequential-power.js';
import { assumedComponents, powerAdvice, rescaleComponents, TARGET_POWER } from '../metrics/verdict.js';
import { computeReport } from '../report/compute.js';
import { DEFAULT_MARGIN_BITS, declaredFamily } from '../report/verdicts.js';
import { powerDefaultsFor, type ComponentSd, type PowerDefaults } from './power-defaults.js';

/**
 * `plan GRID --power [--pilot AUDIT_DIR]`: per declared comparison of the grid, the probability
 * that the audit as written decides it (higher, lower or equivalent within the margin), and the
 * cheapest change that reaches 80%. Variance components come from a pilot audit's report (its
 * observed effects too), else from the documented defaults of the grid's model backend
 * (power-defaults.ts) at a stated effect.
 */
export const DEFAULT_PLAN_EFFECT_BITS = 2;
const ALPHA = 0.05;

export interface PowerRow {
  comparison: string;
  /** The effect the probability is for (bits): the pilot's estimate, or the assumed one. */
  effect: number;
  /** Decision probability with the grid's seeds and canaries; null when the pilot cannot say (one run per arm). */
  probability: number | null;
  /** Seeds per cell that reach 80% with the canaries as written (null: not within 64×). */
  seeds: number | null;
  /** Focal canaries per run that reach 80% with the seeds as written (null: not within 64×). */
  canaries: number | null;
  /** The change in words. */
  advice: string;
  /**
   * A sequential grid: the probability of a decision by max under its spending rule and the
   * expected seeds per cell (looks as independent tests; src/metrics/sequential-power.ts); null
   * when the components cannot say. Absent for a fixed grid.
   */
  sequential?: SequentialPower | null;
}

export interface PowerPlan {
  source: string;
  margin_bits: number;
  alpha: number;
  seeds: number;
  canaries: number;
  /** Without a pilot: the backend defaults used (null with a pilot). */
  defaults: PowerDefaults | null;
  /** `replicates: {until: decided}`: the looks' design (`seeds` is then max). Absent for a fixed grid. */
  sequential?: { min: number; max: number; spending: SpendingFunction };
  rows: PowerRow[];
}

interface Planned {
  comparison: string;
  effect: number;
  components: VarianceComponents[];
}

function row(p: Planned, seeds: number, canaries: number, margin: number, cells: number): PowerRow {
  const scaled = rescaleComponents(p.components, seeds, canaries);
  const a = powerAdvice(p.effect, scaled, margin, ALPHA);
  if (!a)
    return {
      comparison: p.comparison,
      effect: p.effect,
      probability: null,
      seeds: null,
      canaries: null,
      advice: 'the pilot has one run per arm here: no run-to-run variance to plan with (give the pilot ≥ 2 seeds)',
    };
  let advice: string;
  if (a.probability >= TARGET_POWER) advice = 'reaches 80% as written';
  else if (a.canaries !== null)
    advice = `cheapest: canaries.focal ${a.canaries} (no more runs)${a.runs !== null ? `, or ${a.runs} seeds per cell (+${(a.runs - seeds) * cells} runs)` : ''}`;
  else if (a.runs !== null)
    advice = `cheapest: ${a.runs} seeds per cell (+${(a.runs - seeds) * cells} runs); more canaries alone would not reach 80%`;
  else if (a.both)
    advice = `cheapest: ${a.both.runs} seeds per cell (+${(a.both.runs - seeds) * cells} runs) and canaries.focal ${a.both.canaries}; neither alone reaches 80%`;
  else advice = `not within ${64 * seeds} seeds per cell and ${64 * canaries} canaries per run`;
  return {
    comparison: p.comparison,
    effect: p.effect,
    probability: a.probability,
    seeds: a.runs,
    canaries: a.canaries,
    advice,
  };
}

/** The comparisons the grid declares, as the report will name them, with assumed components. */
function assumedFamily(
  plan: AuditPlan,
  seeds: number,
  effect: number,
  sd: { arm: ComponentSd; paired: ComponentSd },
): Planned[] {
  const { doc, expansion } = plan.grid;
  const focal = doc.canaries.focal;
  const heldOut = doc.canaries.held_out;
  const arm = (n: number): VarianceComponents => assumedComponents(sd.arm, seeds, n);
  const pairedSd = sd.paired;
  const out: Planned[] = [];
  const doses = expansion.axes.dose.map((d) => d.label);
  for (const v of expansion.axes.visibility) {
    if (heldOut > 0)
      out.push({
        comparison: `visibility=${v.label}, dose=${doses[doses.length - 1]}: inserted − held-out control`,
        effect,
        components: [arm(focal), arm(heldOut)],
      });
    if (doses.length > 1)
      out.push({
        comparison: `visibility=${v.label}: dose ${doses[doses.length - 1]} − dose ${doses[0]}`,
        effect,
        components: [arm(focal), arm(focal)],
      });
  }
  for (const [axis, values] of Object.entries(expansion.axes)) {
    if (axis === 'seed' || axis === 'dose' || values.length < 2) continue;
    out.push({
      comparison: `${axis} ${values[values.length - 1]?.label} − ${values[0]?.label}, paired`,
      effect,
      components: [assumedComponents(pairedSd, seeds, focal)],
    });
  }
  return out;
}

export async function planPower(
  plan: AuditPlan,
  options: { pilot?: string; effect?: number } = {},
): Promise<PowerPlan> {
  const { doc, expansion } = plan.grid;
  const seeds = expansion.axes.seed.length;
  const canaries = doc.canaries.focal;
  const margin = doc.analysis?.margin_bits ?? DEFAULT_MARGIN_BITS;
  const cells = plan.runs.length / seeds;
  let planned: Planned[];
  let source: string;
  let defaults: PowerDefaults | null = null;
  if (options.pilot) {
    const { summary } = await computeReport({ auditDir: options.pilot, resamples: 1000 });
    planned = declaredFamily(summary).map((m) => ({
      comparison: m.comparison,
      effect: options.effect ?? m.estimate,
      components: m.components,
    }));
    source = `pilot ${summary.audit.id} (${summary.counts.finished} finished runs): its variance components${options.effect === undefined ? ' and observed effects' : ''}`;
  } else {
    const effect = options.effect ?? DEFAULT_PLAN_EFFECT_BITS;
    const chosen = powerDefaultsFor(expansion.axes.model.map((m) => m.value));
    defaults = chosen.defaults;
    planned = assumedFamily(plan, seeds, effect, defaults);
    source = defaultsText(defaults, chosen.backends);
  }
  const r = doc.replicates;
  const design =
    r?.until === 'decided' && r.min !== undefined && r.max !== undefined
      ? { min: r.min, max: r.max, spending: r.spending ?? DEFAULT_SPENDING }
      : null;
  const schedule = design ? lookSchedule({ ...design, alpha: ALPHA }) : [];
  return {
    source,
    margin_bits: margin,
    alpha: ALPHA,
    seeds,
    canaries,
    defaults,
    ...(design ? { sequential: design } : {}),
    rows: planned.map((p) => ({
      ...row(p, seeds, canaries, margin, cells),
      ...(design ? { sequential: sequentialPower(p.effect, p.components, canaries, schedule, margin) } : {}),
    })),
  };
}

const sdText = (sd: ComponentSd): string =>
  `run ${sd.run.toFixed(2)}, canary ${sd.canary.toFixed(2)}, run × canary ${sd.interaction.toFixed(2)}`;

/** Which defaults a plan without a pilot used, their figures and their source, in one clause. */
function defaultsText(d: PowerDefaults, backends: readonly string[]): string {
  const which =
    backends.length > 1
      ? `the ${d.backend} backend's defaults (the largest of this grid's backends: ${backends.join(', ')})`
      : `the ${d.backend} backend's defaults`;
  return `${which} (${d.measured ? 'measured: ' : ''}${d.source}): sd in bits of an arm's median ${sdText(d.arm)}; of a paired difference ${sdText(d.paired)}; for this grid's own, give --pilot AUDIT_DIR`;
}

export function powerText(p: PowerPlan): string {
  const lines = [
    `power: ${p.seeds} seed(s) per cell × ${p.canaries} focal canaries per run; α ${p.alpha}, margin ±${p.margin_bits} bits, target 80%`,
    `  variance: ${p.source}`,
    ...(p.sequential
      ? [
          `  sequential: looks at ${p.sequential.min} to ≤${p.sequential.max} seeds per cell, ${p.sequential.spending} spending; "P(decided)" and the advice below are the fixed design at ${p.sequential.max} seeds and α ${p.alpha}; "by ${p.sequential.max}" reads the looks as one growing audit (correlated looks, src/metrics/sequential-power.ts; no Holm across comparisons), "≥" holds whatever the correlation, "independent looks" overstates`,
        ]
      : []),
    ...p.rows.flatMap((r) => [
      `  ${r.comparison} at effect ${r.effect >= 0 ? '+' : ''}${r.effect.toFixed(2)} bits: ${r.probability === null ? '—' : `P(decided) ${r.probability.toFixed(2)}`}; ${r.advice}`,
      ...(r.sequential !== undefined && p.sequential ? [sequentialText(r.sequential, p.sequential.max)] : []),
    ]),
  ];
  if (p.rows.length === 0)
    lines.push('  no declared comparison (the grid has no held-out canaries, one dose and no compared axis)');
  return `${lines.join('\n')}\n`;
}

/** `    sequential: P(decided by 6) ≈ 0.62 (≥ 0.48; independent looks 0.80); expected 4.3 of ≤6 seeds per cell (…)` */
function sequentialText(s: SequentialPower | null, max: number): string {
  if (!s) return '    sequential: — (no run-to-run variance to plan with)';
  const looks = s.looks.map((l) => `${l.probability.toFixed(2)} at ${l.seeds}`).join(', ');
  return `    sequential: P(decided by ${max}) ≈ ${s.probability.toFixed(2)} (≥ ${s.at_least.toFixed(2)}; independent looks ${s.independent.toFixed(2)}); expected ${s.expected_seeds.toFixed(1)} of ≤${max} seeds per cell (each look alone: ${looks})`;
}
