import type { Axis } from '../metrics/cells.js';
import type { Observation } from '../metrics/observation.js';
import type { UtilityMetricSummary } from './utility.js';

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

/**
 * A greedy decode that ran but held no code: a value of its own, since an empty cell means "not
 * applicable" (the decode mode was not run) everywhere in the table.
 */
export const NO_CODE = 'none';

/** Table Schema types (Frictionless): what a loader should read each column as. */
export type ColumnType = 'string' | 'integer' | 'number' | 'boolean';

export interface ColumnSpec {
  name: string;
  type: ColumnType;
  description: string;
  constraints?: { enum?: string[]; required?: boolean };
}

/**
 * Columns that hold codes: digit strings with meaningful leading zeros (`0999`). They are always
 * quoted in the CSV and typed `string` in the data package, so a loader that guesses types would
 * be told otherwise.
 */
export const CODE_COLUMNS = ['code', 'shown_code', 'greedy_prefill_code', 'greedy_free_code'] as const;

const METRIC_SPECS: Record<(typeof METRIC_COLUMNS)[number], Omit<ColumnSpec, 'name'>> = {
  phase: { type: 'string', description: 'base, final or update-<n> (a checkpoint).' },
  update: { type: 'integer', description: 'Optimizer update the phase was scored at.' },
  canary_id: { type: 'string', description: 'Canary id (pairs across runs need id and code).' },
  code: { type: 'string', description: 'The canary’s secret code, leading zeros kept.' },
  role: {
    type: 'string',
    description: 'What the canary is in this run.',
    constraints: { enum: ['focal', 'auxiliary', 'held_out', 'no_canary'] },
  },
  cohort: { type: 'string', description: 'Cohort of an inserted canary; empty otherwise.' },
  dose: { type: 'integer', description: 'The canary’s own appearances in training; empty when never inserted.' },
  visibility: {
    type: 'string',
    description: 'Cue of an inserted canary (visible, redacted, encoded:<scheme>); empty otherwise.',
  },
  probe_id: { type: 'string', description: 'Probe id.' },
  probe_kind: {
    type: 'string',
    description: 'Probe kind.',
    constraints: { enum: ['hidden', 'supplied', 'substituted'] },
  },
  shown_code: {
    type: 'string',
    description: 'Code shown in the prompt (supplied, substituted probes), leading zeros kept; empty otherwise.',
  },
  space_kind: { type: 'string', description: 'Candidate space.', constraints: { enum: ['exhaustive', 'sampled'] } },
  space_size: { type: 'integer', description: '|C|, the true code included.' },
  rank: {
    type: 'integer',
    description: '1 + candidates scoring at least the true code’s score (ties count against it).',
  },
  ties: { type: 'integer', description: 'Other candidates scoring exactly the true code’s score.' },
  exposure: { type: 'number', description: 'log2|C| − log2(rank), bits.' },
  exposure_ceiling: { type: 'number', description: 'log2|C|, the exposure of a code ranked first.' },
  true_score: { type: 'number', description: 'Sum of log-probabilities of the true code’s tokens.' },
  best_other_score: { type: 'number', description: 'Highest score among the other candidates.' },
  shown_rank: { type: 'integer', description: 'Rank of the shown code when it is a candidate; empty otherwise.' },
  shown_exposure: {
    type: 'number',
    description: 'Exposure of the shown code when it is a candidate; empty otherwise.',
  },
  greedy_prefill_code: {
    type: 'string',
    description: `Code read from the greedy output after the prefill, leading zeros kept; "${NO_CODE}" when the output held no code; empty when not decoded.`,
  },
  recovered_prefill: {
    type: 'boolean',
    description: 'Greedy output (prefill) equals the true code; empty when not decoded.',
  },
  copied_prefill: {
    type: 'boolean',
    description: 'Greedy output (prefill) equals the shown code; empty when no code is shown.',
  },
  greedy_free_code: {
    type: 'string',
    description: `Code read from free greedy generation, leading zeros kept; "${NO_CODE}" when the output held no code; empty when not run.`,
  },
  recovered_free: { type: 'boolean', description: 'Greedy output (free) equals the true code; empty when not run.' },
  copied_free: {
    type: 'boolean',
    description: 'Greedy output (free) equals the shown code; empty when not run or no code is shown.',
  },
};

/** A cell column's type from its axis values: integers, numbers, else strings (labels, JSON). */
function axisType(axis: Axis): ColumnType {
  const values = axis.values.filter((v) => v !== null && v !== undefined);
  if (values.length > 0 && values.every((v) => typeof v === 'number' && Number.isInteger(v))) return 'integer';
  if (values.length > 0 && values.every((v) => typeof v === 'number')) return 'number';
  return 'string';
}

/** The columns every table of the report starts with: the audit, the run and the run's cell. */
function runColumns(axes: readonly Axis[]): ColumnSpec[] {
  return [
    { name: 'audit_id', type: 'string', description: 'Audit id.' },
    { name: 'run_id', type: 'string', description: 'Run id (content hash of the manifest).' },
    { name: 'cell_id', type: 'string', description: 'Grid cell id.' },
    ...axes.map(
      (a): ColumnSpec => ({
        name: `cell.${a.name}`,
        type: axisType(a),
        description: `Grid axis ${a.name}: the run’s value (empty where it does not apply).`,
      }),
    ),
  ];
}

/** Every column of report.csv with its type, in file order. */
export function csvColumns(axes: readonly Axis[]): ColumnSpec[] {
  return [...runColumns(axes), ...METRIC_COLUMNS.map((name): ColumnSpec => ({ name, ...METRIC_SPECS[name] }))];
}

/** One CSV table of datapackage.json: the dialect every report CSV is written in, and its columns. */
function csvResource(name: string, path: string, fields: ColumnSpec[]): Record<string, unknown> {
  return {
    name,
    path,
    profile: 'tabular-data-resource',
    format: 'csv',
    mediatype: 'text/csv',
    encoding: 'utf-8',
    dialect: { delimiter: ',', doubleQuote: true, quoteChar: '"', lineTerminator: '\n', header: true },
    schema: { fields, missingValues: [''] },
  };
}

/**
 * `datapackage.json` beside report.csv: a Frictionless tabular data package whose table schema
 * gives every column's type (codes are strings), so loaders need not guess. See docs/reports.md
 * for the one-line pandas and R loads.
 */
export function renderDataPackage(auditId: string, axes: readonly Axis[]): Record<string, unknown> {
  return {
    profile: 'tabular-data-package',
    name: `canary-audit-report-${auditId.toLowerCase().replace(/[^a-z0-9._-]+/g, '-')}`,
    title: `canary-audit report ${auditId}: one row per run × canary × probe × phase`,
    resources: [csvResource('report', 'report.csv', csvColumns(axes))],
  };
}

export function csvField(value: unknown, alwaysQuote = false): string {
  if (value === null || value === undefined) return '';
  const text = typeof value === 'string' ? value : typeof value === 'object' ? JSON.stringify(value) : String(value);
  return alwaysQuote || /[",\r\n]/.test(text) || text !== text.trim() ? `"${text.replaceAll('"', '""')}"` : text;
}

export interface CsvRunInfo {
  audit_id: string;
  cell_id: string;
  cell: Record<string, unknown>;
}

export function renderCsv(
  axes: readonly Axis[],
  runs: ReadonlyMap<string, CsvRunInfo>,
  observations: readonly Observation[],
): string {
  const header = ['audit_id', 'run_id', 'cell_id', ...axes.map((a) => `cell.${a.name}`), ...METRIC_COLUMNS];
  const lines = [header.map((h) => csvField(h)).join(',')];
  // Codes are quoted (and typed string in datapackage.json): `0999` is a code, not the number 999.
  const quoted = header.map((h) => (CODE_COLUMNS as readonly string[]).includes(h));
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
      greedy_prefill_code: o.greedy_prefill ? (o.greedy_prefill.code ?? NO_CODE) : undefined,
      recovered_prefill: o.greedy_prefill?.recovered,
      copied_prefill: o.greedy_prefill?.copied,
      greedy_free_code: o.greedy_free ? (o.greedy_free.code ?? NO_CODE) : undefined,
      recovered_free: o.greedy_free?.recovered,
      copied_free: o.greedy_free?.copied,
    };
    const row = [
      run?.audit_id,
      o.run_id,
      run?.cell_id,
      ...axes.map((a) => run?.cell[a.name]),
      ...METRIC_COLUMNS.map((c) => metrics[c]),
    ];
    lines.push(row.map((v, i) => csvField(v, quoted[i] === true)).join(','));
  }
  return `${lines.join('\n')}\n`;
}

/** Columns of utility.csv after the run's cell: one row per run × utility metric. */
const UTILITY_COLUMNS: readonly ColumnSpec[] = [
  {
    name: 'metric',
    type: 'string',
    description:
      'loss (mean target-token loss), accuracy, exact_match, token_f1, point_in_box or parse_rate (docs/metrics.md).',
  },
  { name: 'rows', type: 'integer', description: 'Utility rows scored.' },
  { name: 'base', type: 'number', description: 'Before fine-tuning: the base model.' },
  { name: 'base_lo', type: 'number', description: 'Lower end of the 95% interval of base (empty for loss).' },
  { name: 'base_hi', type: 'number', description: 'Upper end of the 95% interval of base (empty for loss).' },
  { name: 'final', type: 'number', description: 'After fine-tuning.' },
  { name: 'final_lo', type: 'number', description: 'Lower end of the 95% interval of final (empty for loss).' },
  { name: 'final_hi', type: 'number', description: 'Upper end of the 95% interval of final (empty for loss).' },
  { name: 'delta', type: 'number', description: 'final − base.' },
  {
    name: 'interval',
    type: 'string',
    description: 'How the intervals were made: wilson (one run, a proportion) or bootstrap (token F1).',
  },
];

export interface UtilityCsvRun {
  run_id: string;
  cell_id: string;
  cell: Record<string, unknown>;
  utility: {
    rows: number | null;
    base_loss: number | null;
    final_loss: number | null;
    delta: number | null;
    metrics?: UtilityMetricSummary[];
  } | null;
}

export function utilityCsvColumns(axes: readonly Axis[]): ColumnSpec[] {
  return [...runColumns(axes), ...UTILITY_COLUMNS];
}

/**
 * utility.csv: the task's utility per run, before and after fine-tuning — the loss, and each
 * generation metric with its interval. Written beside report.csv when some run has task metrics.
 */
export function renderUtilityCsv(auditId: string, axes: readonly Axis[], runs: readonly UtilityCsvRun[]): string {
  const lines = [
    utilityCsvColumns(axes)
      .map((c) => csvField(c.name))
      .join(','),
  ];
  for (const run of runs) {
    const u = run.utility;
    if (!u) continue;
    const head = [auditId, run.run_id, run.cell_id, ...axes.map((a) => run.cell[a.name])];
    lines.push(
      [...head, 'loss', u.rows, u.base_loss, null, null, u.final_loss, null, null, u.delta, null]
        .map((v) => csvField(v))
        .join(','),
    );
    for (const m of u.metrics ?? []) {
      const method = m.final?.method ?? m.base?.method ?? null;
      lines.push(
        [
          ...head,
          m.metric,
          m.final?.n ?? m.base?.n ?? u.rows,
          m.base?.estimate,
          m.base?.lo,
          m.base?.hi,
          m.final?.estimate,
          m.final?.lo,
          m.final?.hi,
          m.delta,
          method,
        ]
          .map((v) => csvField(v))
          .join(','),
      );
    }
  }
  return `${lines.join('\n')}\n`;
}

/** The utility.csv resource of datapackage.json. */
export function utilityResource(axes: readonly Axis[]): Record<string, unknown> {
  return csvResource('utility', 'utility.csv', utilityCsvColumns(axes));
}
