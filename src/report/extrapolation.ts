import { median } from '../metrics/statistics.js';
import { cellLabel, groupCell } from '../metrics/cells.js';
import type { Observation } from '../metrics/observation.js';
import type { LoadedAudit } from './load-audit.js';

/**
 * Extrapolated exposure beside rank exposure, per cell (seed axes removed), canary role and probe
 * kind, final phase: only for probes of a sampled space that the report extrapolated
 * (`report --extrapolate` or the grid's `analysis.extrapolate`). A withheld or unfit fit never
 * stands in for a number: such a probe enters the extrapolated median at its rank exposure (a
 * floor), and is counted.
 */
export interface ExtrapolationGroup {
  cell: string;
  role: string;
  probe_kind: string;
  /** Probes (run × canary). */
  n: number;
  /** log2|C|: the most a rank among the sampled candidates can show. */
  rank_ceiling: number;
  /** Probes ranked first (rank exposure at the ceiling). */
  at_ceiling: number;
  rank_exposure_median: number;
  /** Median of the extrapolated exposure, the rank exposure standing in where the fit was withheld or unfit. */
  extrapolated_median: number;
  /** Fits that passed both diagnostics, were flagged (value kept, at or below the ceiling), withheld, or impossible. */
  ok: number;
  flagged: number;
  withheld: number;
  unfit: number;
  /** Reported extrapolated values above the rank ceiling (all from fits that passed). */
  above_ceiling: number;
}

export function extrapolationGroups(
  audit: LoadedAudit,
  observations: readonly Observation[],
  options: { seedAxes: readonly string[]; labelAxes?: ReadonlySet<string> },
): ExtrapolationGroup[] {
  const cellOf = new Map(
    audit.runs.map((r) => [r.run_id, groupCell(r.cell, { seedAxes: [...options.seedAxes], doseAxis: '' })]),
  );
  const groups = new Map<string, { head: Omit<ExtrapolationGroup, 'n'>; rows: Observation[] }>();
  for (const o of observations) {
    if (o.phase !== 'final' || !o.extrapolated) continue;
    const cell = cellOf.get(o.run_id) ?? {};
    const label = cellLabel(cell, options.labelAxes);
    const key = `${JSON.stringify(Object.entries(cell))}\u0000${o.role}\u0000${o.probe_kind}`;
    let g = groups.get(key);
    if (!g) {
      g = {
        head: {
          cell: label,
          role: o.role,
          probe_kind: o.probe_kind,
          rank_ceiling: o.exposure_ceiling,
          at_ceiling: 0,
          rank_exposure_median: 0,
          extrapolated_median: 0,
          ok: 0,
          flagged: 0,
          withheld: 0,
          unfit: 0,
          above_ceiling: 0,
        },
        rows: [],
      };
      groups.set(key, g);
    }
    g.rows.push(o);
  }
  return [...groups.values()].map(({ head, rows }) => {
    const out: ExtrapolationGroup = { ...head, n: rows.length };
    for (const o of rows) {
      const x = o.extrapolated as NonNullable<Observation['extrapolated']>;
      out[x.status] += 1;
      if (o.rank === 1) out.at_ceiling += 1;
      if (x.exposure !== null && x.exposure > o.exposure_ceiling) out.above_ceiling += 1;
    }
    out.rank_exposure_median = median(rows.map((o) => o.exposure));
    out.extrapolated_median = median(rows.map((o) => o.extrapolated?.exposure ?? o.exposure));
    return out;
  });
}
