import type { Axis } from '../metrics/cells.js';
import type { Observation } from '../metrics/observation.js';

/**
 * The tidy table: one row per run × canary × probe × phase, with every cell value (columns
 * `cell.<axis>`) and every per-probe metric, at full precision. RFC 4180 quoting.
 */
const METRIC_COLUMNS = [
  'phase',
  'update',
  'canary_id',
  'code',
  'role',
  'cohort',
  'dose',
  'visibility',
  'probe_id',
  'probe_kind',
  'shown_code',
  'space_kind',
  'space_size',
  'rank',
  'ties',
  'exposure',
  'exposure_ceiling',
  'true_score',
  'best_other_score',
  'shown_rank',
  'shown_exposure',
  'greedy_prefill_code',
  'recovered_prefill',
  'copied_prefill',
  'greedy_free_code',
  'recovered_free',
  'copied_free',
] as const;

export function csvField(value: unknown): string {
  if (value === null || value === undefined) return '';
  const text = typeof value === 'string' ? value : typeof value === 'object' ? JSON.stringify(value) : String(value);
  return /[",\r\n]/.test(text) || text !== text.trim() ? `"${text.replaceAll('"', '""')}"` : text;
}

export interface CsvRunInfo {
  audit_id: string;
  cell_id: string;
  cell: Record<string, unknown>;
}

export function renderCsv(axes: readonly Axis[], runs: ReadonlyMap<string, CsvRunInfo>, observations: readonly Observation[]): string {
  const header = ['audit_id', 'run_id', 'cell_id', ...axes.map((a) => `cell.${a.name}`), ...METRIC_COLUMNS];
  const lines = [header.map(csvField).join(',')];
  for (const o of observations) {
    const run = runs.get(o.run_id);
    const metrics: Record<(typeof METRIC_COLUMNS)[number], unknown> = {
      phase: o.phase,
      update: o.update,
      canary_id: o.canary_id,
      code: o.code,
      role: o.role,
      cohort: o.cohort,
      dose: o.dose,
      visibility: o.visibility,
      probe_id: o.probe_id,
      probe_kind: o.probe_kind,
      shown_code: o.shown_code,
      space_kind: o.space_kind,
      space_size: o.space_size,
      rank: o.rank,
      ties: o.ties,
      exposure: o.exposure,
      exposure_ceiling: o.exposure_ceiling,
      true_score: o.true_score,
      best_other_score: o.best_other_score,
      shown_rank: o.shown_rank,
      shown_exposure: o.shown_exposure,
      greedy_prefill_code: o.greedy_prefill?.code,
      recovered_prefill: o.greedy_prefill?.recovered,
      copied_prefill: o.greedy_prefill?.copied,
      greedy_free_code: o.greedy_free?.code,
      recovered_free: o.greedy_free?.recovered,
      copied_free: o.greedy_free?.copied,
    };
    const row = [run?.audit_id, o.run_id, run?.cell_id, ...axes.map((a) => run?.cell[a.name]), ...METRIC_COLUMNS.map((c) => metrics[c])];
    lines.push(row.map(csvField).join(','));
  }
  return `${lines.join('\n')}\n`;
}
