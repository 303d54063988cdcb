import type { GroupSummary } from '../metrics/aggregate.js';
import type { ArmSummary } from '../metrics/arm.js';
import { formatValue } from '../metrics/cells.js';
import type { PairedSummary } from '../metrics/paired.js';
import { counts, differenceCi, medianCi, num, proportion, runCountList } from './format.js';
import type { ReportSummary } from './summary.js';

/**
 * The report's findings in sentences. First one plain sentence per declared comparison with its
 * verdict (`verdict`, from summary.verdicts: report/verdicts.ts); then the figures behind them,
 * one per comparison the grid was built for, each with its interval, control and n. Design names,
 * n_eff and t(df) are in the methods section, not here. The summary box of the report lists them;
 * `run` prints the first figure (the headline) and the verdicts when the audit ends.
 */
export interface Finding {
  /** verdict: a declared comparison's verdict; control: inserted vs its control in one cell; dose: lowest vs highest dose; paired: along an axis; copy: substituted probes. */
  kind: 'verdict' | 'control' | 'dose' | 'paired' | 'copy';
  text: string;
  /** For ordering the headline: the size of the effect in bits (controls), else 0. */
  weight: number;
}

/** The probe kind the findings speak of: hidden when the grid probes it, else the first one. */
function mainKind(groups: GroupSummary[]): string | null {
  const kinds = [...new Set(groups.map((g) => g.probe_kind))];
  return kinds.includes('hidden') ? 'hidden' : (kinds[0] ?? null);
}

function n(a: ArmSummary): string {
  return `n = ${counts(a)}${a.exposure?.resampling !== undefined && a.exposure.resampling !== 'flat' ? '' : ', one run: a rerun can fall outside this interval'}`;
}

/** `cell (dose 16, hidden probes)`, naming only what the label does not already say. */
function where(g: GroupSummary): string {
  const dose = g.dose !== null && !/\bdose=/.test(g.label) ? `, dose ${g.dose}` : '';
  return `${g.label || 'all runs'}${dose}, ${g.probe_kind} probes`;
}

function controlSentence(g: GroupSummary): Finding | null {
  const e = g.inserted.exposure;
  if (!e) return null;
  const [name, control] = g.controls.held_out
    ? ['held-out canaries of the same runs', g.controls.held_out]
    : g.controls.base
      ? ['the base model', g.controls.base]
      : g.controls.no_canary
        ? ['a no-canary run', g.controls.no_canary]
        : [null, null];
  const ceiling = `ceiling ${num(g.space.ceiling)}`;
  if (!control?.exposure) {
    return {
      kind: 'control',
      weight: 0,
      text: `${where(g)}: median exposure ${medianCi(e)} bits (${ceiling}), no control in this grid; ${n(g.inserted)}.`,
    };
  }
  const d = control.difference;
  return {
    kind: 'control',
    weight: d?.estimate ?? 0,
    text: `${where(g)}: median exposure ${medianCi(e)} bits (${ceiling}) against ${medianCi(control.exposure)} for ${name}${d ? `, Δ ${differenceCi(d)}` : ''}; ${n(g.inserted)}.`,
  };
}

function doseSentence(low: GroupSummary, high: GroupSummary): Finding | null {
  if (!low.inserted.exposure || !high.inserted.exposure) return null;
  const context = low.visibility !== null ? `${low.visibility}, ` : '';
  return {
    kind: 'dose',
    weight: 0,
    text: `Dose ${low.dose} → ${high.dose} (${context}${low.probe_kind} probes): median exposure ${medianCi(low.inserted.exposure)} → ${medianCi(high.inserted.exposure)} bits; n = ${counts(low.inserted)} and ${counts(high.inserted)}.`,
  };
}

function pairedSentence(p: PairedSummary, varying: ReadonlySet<string>): Finding {
  const context = Object.entries(p.context)
    .filter(([axis]) => varying.has(axis))
    .map(([axis, value]) => `${axis} ${formatValue(value)}`)
    .join(', ');
  return {
    kind: 'paired',
    weight: 0,
    text: `${p.axis} ${formatValue(p.from)} → ${formatValue(p.to)}${context ? ` (${context}, ${p.probe_kind} probes)` : ` (${p.probe_kind} probes)`}: paired difference ${differenceCi(p.difference)} bits, higher in ${p.rose} and lower in ${p.fell}; n = ${p.n_pairs} canary pairs (${p.n_canaries} canaries × ${p.n_run_pairs} run pair(s))${p.difference.resampling === 'flat' ? '; one run pair: a rerun can fall outside this interval' : ''}.`,
  };
}

function copySentence(g: GroupSummary): Finding | null {
  const copied = g.inserted.copy?.prefill ?? null;
  if (!copied) return null;
  const held = g.controls.held_out?.copy?.prefill ?? null;
  return {
    kind: 'copy',
    weight: 0,
    text: `${where(g)}: the greedy output copied the code shown in the prompt for ${proportion(copied)}${held ? ` of the inserted canaries, and for ${proportion(held)} of the held-out ones` : ''}; ${n(g.inserted)}${copied.runs.length > 1 ? `; per run ${runCountList(copied)}` : ''}.`,
  };
}

export function findings(s: ReportSummary): Finding[] {
  const groups = s.groups.filter((g) => g.cohort === 'focal' && g.phase === 'final');
  const kind = mainKind(groups);
  if (kind === null) return [];
  const main = groups.filter((g) => g.probe_kind === kind);
  const out: Finding[] = (s.verdicts ?? []).map((v) => ({ kind: 'verdict', weight: 0, text: v.sentence }));
  // Per visibility (or the whole grid): inserted vs control at the highest dose, and the dose range.
  const byVisibility = new Map<string, GroupSummary[]>();
  for (const g of main) byVisibility.set(g.visibility ?? '', [...(byVisibility.get(g.visibility ?? '') ?? []), g]);
  for (const list of byVisibility.values()) {
    const withDose = list.filter((g) => g.dose !== null).sort((a, b) => (a.dose as number) - (b.dose as number));
    const doses = [...new Set(withDose.map((g) => g.dose))];
    const top = withDose.length > 0 ? withDose.filter((g) => g.dose === doses[doses.length - 1]) : list;
    for (const g of top) {
      const f = controlSentence(g);
      if (f) out.push(f);
    }
    if (doses.length > 1) {
      const low = withDose.find((g) => g.dose === doses[0]) as GroupSummary;
      const high =
        withDose.find(
          (g) =>
            g.dose === doses[doses.length - 1] && g.key.replace(/dose=[^,]*/, '') === low.key.replace(/dose=[^,]*/, ''),
        ) ?? (top[0] as GroupSummary);
      const f = doseSentence(low, high);
      if (f) out.push(f);
    }
  }
  // Along each compared axis (visibility, placement, ...): the paired difference at the highest dose.
  const varying = new Set(s.audit.axes.filter((a) => a.values.length > 1 && a.role !== 'seed').map((a) => a.name));
  const paired = s.paired.filter((p) => p.cohort === 'focal' && p.phase === 'final' && p.probe_kind === kind);
  for (const axis of [...new Set(paired.map((p) => p.axis))]) {
    const list = paired.filter((p) => p.axis === axis).sort((a, b) => (b.dose ?? 0) - (a.dose ?? 0));
    if (list[0]) out.push(pairedSentence(list[0], varying));
  }
  // Substituted probes: how often the shown code is copied, at the highest dose per visibility.
  for (const list of byVisibility.values()) {
    const doses = list.map((g) => g.dose ?? 0);
    const top = Math.max(...doses);
    const sub = groups.find(
      (g) =>
        g.probe_kind === 'substituted' && (g.visibility ?? '') === (list[0]?.visibility ?? '') && (g.dose ?? 0) === top,
    );
    const f = sub ? copySentence(sub) : null;
    if (f) out.push(f);
  }
  return out;
}

/** The one finding `run` prints at the end: the control comparison with the largest effect. */
export function headline(s: ReportSummary): string | null {
  const all = findings(s);
  const controls = all.filter((f) => f.kind === 'control').sort((a, b) => b.weight - a.weight);
  return (controls[0] ?? all[0])?.text ?? null;
}
