import { formatValue } from '../metrics/cells.js';
import type { GroupSummary } from '../metrics/aggregate.js';
import type { PairedSummary } from '../metrics/paired.js';
import {
  armCell,
  copyRate,
  counts,
  countsAndResampling,
  DASH,
  differenceCell,
  medianCi,
  num,
  proportion,
  runCountList,
  runMedianList,
  short,
  signed,
} from './format.js';
import { numericsLabel, type ReportSummary } from './summary.js';
import { findings } from './findings.js';
import { sequentialLooks } from './sequential-section.js';
import { canaryDesignsSection } from './canary-designs.js';
import { PAIRED_NOTE, privacyNote, RECOVERY_NOTE, resamplingNote, TASK_METRICS_NOTE } from './prose.js';
import { CONTROL_WARNING_KINDS, type StampBrief } from './provenance-check.js';
import { METRIC_WORDS, type UtilityMetricSummary } from './utility.js';
import type { UtilityInterval } from '../metrics/utility.js';

/**
 * The report as a document of sections and tables, built once from the summary and rendered by
 * both the Markdown and the HTML writer, so the two always show the same figures.
 */
export interface Table {
  caption?: string;
  columns: string[];
  rows: string[][];
  /** What every row shares, said once under the table instead of in each cell. */
  notes?: string[];
}

export interface Section {
  id: string;
  /** summary: the box of findings the report opens with. */
  kind?: 'summary';
  /** Reference material (provenance, per-run tables): folded in the HTML page, open in Markdown. */
  folded?: boolean;
  title: string;
  paragraphs: string[];
  list?: string[];
  tables: Table[];
  /** Plot ids shown with this section (HTML only). */
  plots?: string[];
}

export interface ReportDocument {
  title: string;
  sections: Section[];
}

const PAIRED_AXIS_ORDER = ['placement', 'population', 'spacing', 'visibility', 'schedule'];

function finalFocal(groups: GroupSummary[]): GroupSummary[] {
  return groups.filter((g) => g.cohort === 'focal' && g.phase === 'final');
}

function stamp(s: StampBrief | null): string {
  if (!s) return DASH;
  return `${short(s.git_commit)}${s.git_dirty ? '+dirty' : ''} · code ${short(s.code_sha256)}`;
}

function overview(s: ReportSummary): Section {
  const spaces = [
    ...new Set(
      s.runs.flatMap((r) =>
        r.candidate_space
          ? [
              `${r.candidate_space.kind} |C| = ${r.candidate_space.size} (ceiling log2|C| = ${num(r.candidate_space.ceiling)})`,
            ]
          : [],
      ),
    ),
  ];
  const c = s.counts;
  return {
    id: 'overview',
    title: 'Methods and counts',
    paragraphs: [
      `Audit **${s.audit.name}** (\`${s.audit.id}\`): ${c.runs} runs — ${c.finished} finished, ${c.failed} failed, ${c.missing} missing; ${c.no_canary_runs} no-canary control run(s). ${c.observations} observations from ${c.score_files} score files.`,
      `Candidate space: ${spaces.join('; ') || DASH}. Exposure = log2|C| − log2(rank), rank = 1 + #{other candidates scoring ≥ the true code} (ties count against the secret); the ceiling is the exposure of a code ranked first.`,
      ...(s.design ? [s.design.text] : []),
      ...(s.utility_headline
        ? [`**Task utility vs exposure** — ${s.utility_headline.map((h) => h.text).join(' ')}`]
        : []),
      resamplingNote(s.settings),
      ...(s.verdicts && s.verdicts.length > 0 ? [verdictMethods(s.verdicts)] : []),
    ],
    ...(s.warnings.length > 0 ? { list: s.warnings.map((w) => `**${w.kind}**: ${w.message}`) } : {}),
    tables: [],
  };
}

/** How the Findings' verdicts were reached, with the jargon the sentences leave out. */
function verdictMethods(v: NonNullable<ReportSummary['verdicts']>): string {
  const first = v[0] as NonNullable<ReportSummary['verdicts']>[number];
  const details = v.map(
    (x) =>
      `${x.comparison}: se ${num(x.se)}, ${x.df === null ? 'normal (one run per arm, percentile interval read as normal)' : `t(${num(x.df, 1)})`}, p ${num(x.unadjusted.p_difference, 3)} (no difference) and ${num(x.unadjusted.p_equivalence, 3)} (TOST), Holm-adjusted ${num(x.adjusted.p_difference, 3)} and ${num(x.adjusted.p_equivalence, 3)}${x.power ? `; decision probability at the observed effect ${num(x.power.probability)}` : ''}`,
  );
  return `**Verdicts** — each declared comparison (${v.length}: inserted vs control at the highest dose, lowest vs highest dose, the paired difference along each compared axis; copy rates are described, not tested) is *higher* or *lower* when the two-sided test of no difference rejects at α = ${num(first.alpha, 2)} (its ${Math.round((1 - first.alpha) * 100)}% interval excludes 0), *equivalent* when both one-sided tests against ±${num(first.margin_bits)} bits reject (TOST; the grid's analysis.margin_bits), else *undecided*; the tests use the interval's own estimate, se and t(df). The family is adjusted by Holm's step-down (at most one of a comparison's two nulls can be true, so α is divided by the number of comparisons with a test still open); both readings are printed. An undecided comparison names the runs that would decide it with 80% probability at the observed effect, from the interval's run, canary and run × canary variance components (docs/metrics.md, Verdicts and power). ${details.join('; ')}.`;
}

function exposureVsDose(s: ReportSummary): Section {
  const groups = finalFocal(s.groups);
  const visibilities = [...new Set(groups.map((g) => g.visibility ?? DASH))];
  return {
    id: 'exposure-vs-dose',
    title: 'Exposure vs dose',
    paragraphs: [
      groups.length === 0
        ? 'No finished run has focal canaries yet.'
        : 'Focal canaries after fine-tuning, grouped by cell, probe and each canary’s own dose, beside the held-out canaries of the same runs (the prior control). Other controls are in “Controls”.',
    ],
    tables: visibilities.map((v) => ({
      caption: `Visibility: ${v}`,
      columns: [
        'Cell',
        'Probe',
        'Dose',
        'Exposure median [95% CI]',
        'Per-run medians',
        'Ceiling',
        'n',
        'Held-out control',
        'Δ vs held-out [95% CI]',
        'Recovered (prefill)',
      ],
      rows: groups
        .filter((g) => (g.visibility ?? DASH) === v)
        .map((g) => [
          g.label,
          g.probe_kind,
          String(g.dose ?? DASH),
          medianCi(g.inserted.exposure),
          runMedianList(g.inserted),
          num(g.space.ceiling),
          countsAndResampling(g.inserted),
          armCell(g.controls.held_out),
          differenceCell(g.controls.held_out?.difference ?? null),
          proportion(g.inserted.recovery.prefill),
        ]),
    })),
    plots: ['exposure-vs-dose'],
  };
}

function controls(s: ReportSummary): Section {
  const groups = finalFocal(s.groups);
  return {
    id: 'controls',
    title: 'Controls',
    paragraphs: [
      'Every focal figure beside its three controls: held-out canaries of the same runs (never inserted), the same canaries scored by the base model before fine-tuning, and the same canaries (id and code) in a run that inserts no canary. A control is “—” when the grid does not provide it.',
    ],
    tables: [
      {
        columns: [
          'Cell',
          'Visibility',
          'Probe',
          'Dose',
          'Inserted',
          'Held-out',
          'Δ held-out',
          'Base model',
          'Δ base',
          'No-canary run',
          'Δ no-canary',
        ],
        rows: groups.map((g) => [
          g.label,
          g.visibility ?? DASH,
          g.probe_kind,
          String(g.dose ?? DASH),
          armCell(g.inserted),
          armCell(g.controls.held_out),
          differenceCell(g.controls.held_out?.difference ?? null),
          armCell(g.controls.base),
          differenceCell(g.controls.base?.difference ?? null),
          armCell(g.controls.no_canary),
          differenceCell(g.controls.no_canary?.difference ?? null),
        ]),
      },
    ],
  };
}

function recovery(s: ReportSummary): Section {
  const groups = finalFocal(s.groups);
  return {
    id: 'recovery',
    title: 'Recovery',
    paragraphs: [RECOVERY_NOTE],
    tables: [
      {
        columns: [
          'Cell',
          'Visibility',
          'Probe',
          'Dose',
          'n',
          'Ranked first',
          'Recovered (prefill)',
          'Recovered (free)',
          'Copied shown (prefill)',
          'Copied per run',
          'Held-out recovered (prefill)',
          'Held-out copied (prefill)',
        ],
        rows: groups.map((g) => [
          g.label,
          g.visibility ?? DASH,
          g.probe_kind,
          String(g.dose ?? DASH),
          counts(g.inserted),
          proportion(g.inserted.top1),
          proportion(g.inserted.recovery.prefill),
          proportion(g.inserted.recovery.free),
          g.inserted.copy ? copyRate(g.inserted.copy.prefill) : DASH,
          g.inserted.copy ? runCountList(g.inserted.copy.prefill) : DASH,
          proportion(g.controls.held_out?.recovery.prefill ?? null),
          g.controls.held_out?.copy ? copyRate(g.controls.held_out.copy.prefill) : DASH,
        ]),
      },
    ],
    plots: ['recovery-vs-dose', 'substituted-vs-dose'],
  };
}

/** `dose: 1 → 4`: a paired comparison's title in the tables and the plot. */
export function comparisonTitle(p: Pick<PairedSummary, 'axis' | 'from' | 'to'>): string {
  return `${p.axis}: ${formatValue(p.from)} → ${formatValue(p.to)}`;
}

/**
 * The comparisons in the report's order, shared by the tables and the plot: axes as listed
 * (placement, population, spacing, visibility, schedule, then others by name), and within an axis
 * by the values in order (numbers numerically: 1 → 4 before 1 → 16).
 */
export function orderedComparisons(paired: readonly PairedSummary[]): string[] {
  const rank = (axis: string): number => {
    const i = PAIRED_AXIS_ORDER.indexOf(axis);
    return i < 0 ? PAIRED_AXIS_ORDER.length : i;
  };
  const value = (v: unknown): number | string => (typeof v === 'number' ? v : formatValue(v));
  const cmp = (a: unknown, b: unknown): number => {
    const [x, y] = [value(a), value(b)];
    return typeof x === 'number' && typeof y === 'number' ? x - y : 0;
  };
  const first = new Map<string, PairedSummary>();
  for (const p of paired) if (!first.has(comparisonTitle(p))) first.set(comparisonTitle(p), p);
  return [...first.entries()]
    .sort(
      ([, a], [, b]) =>
        rank(a.axis) - rank(b.axis) || a.axis.localeCompare(b.axis) || cmp(a.from, b.from) || cmp(a.to, b.to),
    )
    .map(([title]) => title);
}

function paired(s: ReportSummary): Section {
  const finals = s.paired.filter((p) => p.phase === 'final');
  const comparisons = new Map<string, PairedSummary[]>();
  for (const p of finals) {
    const title = comparisonTitle(p);
    comparisons.set(title, [...(comparisons.get(title) ?? []), p]);
  }
  const titles = orderedComparisons(finals);
  return {
    id: 'paired',
    title: 'Paired comparisons (placement, population, …)',
    paragraphs: [
      finals.length === 0 ? 'No two finished runs differ in exactly one axis while sharing canaries.' : PAIRED_NOTE,
    ],
    tables: titles.map((title) => ({
      caption: title,
      columns: [
        'Context',
        'Cohort',
        'Probe',
        'Dose',
        'Pairs',
        'Canaries · run pairs',
        'Rose',
        'Fell',
        'Tied',
        'Median from → to',
        'Median paired Δ [95% CI]',
      ],
      rows: (comparisons.get(title) ?? []).map((p) => [
        p.label,
        p.cohort,
        p.probe_kind,
        String(p.dose ?? DASH),
        String(p.n_pairs),
        `${p.n_canaries} · ${p.n_run_pairs}`,
        String(p.rose),
        String(p.fell),
        String(p.tied),
        `${num(p.from_median)} → ${num(p.to_median)}`,
        differenceCell(p.difference, 'paired'),
      ]),
    })),
    plots: ['paired-differences'],
  };
}

function auxiliary(s: ReportSummary): Section | null {
  const groups = s.groups.filter((g) => g.cohort !== 'focal' && g.phase === 'final');
  if (groups.length === 0) return null;
  return {
    id: 'auxiliary',
    title: 'Auxiliary cohorts',
    paragraphs: ['Inserted canaries outside the focal cohort (they shape the population the focal canaries train in).'],
    tables: [
      {
        columns: [
          'Cohort',
          'Cell',
          'Visibility',
          'Probe',
          'Dose',
          'Exposure median [95% CI]',
          'n',
          'Held-out control',
          'Δ vs held-out [95% CI]',
        ],
        rows: groups.map((g) => [
          g.cohort,
          g.label,
          g.visibility ?? DASH,
          g.probe_kind,
          String(g.dose ?? DASH),
          medianCi(g.inserted.exposure),
          countsAndResampling(g.inserted),
          armCell(g.controls.held_out),
          differenceCell(g.controls.held_out?.difference ?? null),
        ]),
      },
    ],
  };
}

function checkpoints(s: ReportSummary): Section | null {
  const focal = s.groups.filter((g) => g.cohort === 'focal');
  if (!focal.some((g) => g.phase !== 'final')) return null;
  return {
    id: 'checkpoints',
    title: 'Exposure over training',
    paragraphs: ['Focal canaries at every evaluated checkpoint (phase update-<n>) and at the end.'],
    tables: [
      {
        columns: [
          'Cell',
          'Visibility',
          'Probe',
          'Dose',
          'Phase',
          'Update',
          'Exposure median [95% CI]',
          'n',
          'Held-out control',
        ],
        rows: focal.map((g) => [
          g.label,
          g.visibility ?? DASH,
          g.probe_kind,
          String(g.dose ?? DASH),
          g.phase,
          String(g.update),
          medianCi(g.inserted.exposure),
          countsAndResampling(g.inserted),
          armCell(g.controls.held_out),
        ]),
      },
    ],
  };
}

/** A utility metric with its interval and n: `3/4 (0.75) [0.30, 0.95]` or `0.62 [0.40, 0.80] (12 rows · 3 runs; runs → rows)`. */
function utilityCell(u: UtilityInterval | null): string {
  if (!u) return DASH;
  const value = u.k !== null && u.n_runs === 1 ? `${u.k}/${u.n} (${num(u.estimate)})` : num(u.estimate);
  const rows = `${u.n} rows${u.n_runs > 1 ? ` · ${u.n_runs} runs` : ''}`;
  const how =
    u.method === 'wilson' ? 'Wilson' : u.resampling === 'hierarchical' ? 'runs → rows' : 'bootstrap over rows';
  return `${value} [${num(u.lo)}, ${num(u.hi)}]${u.k !== null && u.n_runs === 1 ? '' : ` (${rows}; ${how})`}`;
}

function metricRows(lead: string[], metrics: UtilityMetricSummary[] | undefined): string[][] {
  return (metrics ?? []).map((m) => [
    ...lead,
    METRIC_WORDS[m.metric],
    utilityCell(m.base),
    utilityCell(m.final),
    m.delta === null ? DASH : signed(m.delta),
  ]);
}

function utility(s: ReportSummary): Section {
  const runs = s.runs.filter((r) => r.utility);
  const generation = s.utility.some((u) => u.metrics) || runs.some((r) => r.utility?.metrics);
  return {
    id: 'utility',
    title: 'Utility',
    paragraphs: [
      'Mean target-token loss on held-out background rows (never trained on), before and after fine-tuning; Δ = after − before. Medians over runs per cell.',
      ...(generation ? [TASK_METRICS_NOTE] : []),
    ],
    tables: [
      {
        caption: 'Per cell',
        columns: ['Cell', 'No-canary', 'Runs', 'Loss before', 'Loss after', 'Δ'],
        rows: s.utility.map((u) => [
          u.label,
          u.no_canary ? 'yes' : 'no',
          String(u.n_runs),
          num(u.base_loss, 4),
          num(u.final_loss, 4),
          num(u.delta, 4),
        ]),
      },
      {
        caption: 'Per run',
        columns: ['Run', 'Cell', 'Rows', 'Loss before', 'Loss after', 'Δ'],
        rows: runs.map((r) => [
          r.run_id,
          r.cell_id,
          String(r.utility?.rows ?? DASH),
          num(r.utility?.base_loss, 4),
          num(r.utility?.final_loss, 4),
          num(r.utility?.delta, 4),
        ]),
      },
      ...(generation
        ? [
            {
              caption: 'Task metrics per cell',
              columns: ['Cell', 'No-canary', 'Runs', 'Metric', 'Before [95% CI]', 'After [95% CI]', 'Δ'],
              rows: s.utility.flatMap((u) =>
                metricRows([u.label, u.no_canary ? 'yes' : 'no', String(u.n_runs)], u.metrics),
              ),
            },
            {
              caption: 'Task metrics per run',
              columns: ['Run', 'Cell', 'Metric', 'Before [95% CI]', 'After [95% CI]', 'Δ'],
              rows: runs.flatMap((r) => metricRows([r.run_id, r.cell_id], r.utility?.metrics)),
            },
          ]
        : []),
    ],
  };
}

function notFinished(s: ReportSummary): Section {
  const runs = s.runs.filter((r) => r.status !== 'finished');
  return {
    id: 'failed-missing',
    title: 'Failed or missing runs',
    paragraphs: [
      runs.length === 0
        ? 'None: every run of the audit finished.'
        : `${runs.length} run(s) did not contribute to the figures above.`,
    ],
    tables:
      runs.length === 0
        ? []
        : [
            {
              columns: ['Run', 'Cell', 'Status', 'Kind', 'Message', 'Attempts', 'Time'],
              rows: runs.map((r) => [
                r.run_id,
                r.cell_id,
                r.status,
                r.failure?.kind ?? DASH,
                r.failure?.message ?? r.reason ?? DASH,
                r.failure ? String(r.failure.attempts) : DASH,
                r.failure?.time ?? DASH,
              ]),
            },
          ],
  };
}

function provenance(s: ReportSummary): Section {
  const p = s.provenance;
  const w = p.at_write;
  const flagged = s.warnings.filter((x) =>
    ['mixed_code_versions', 'changed_mid_run', 'uncommitted_code', 'mixed_dataset_versions', 'mixed_numerics'].includes(
      x.kind,
    ),
  );
  return {
    id: 'provenance',
    title: 'Provenance',
    paragraphs: [
      `This report: controller ${short(w.git_commit)}${w.git_dirty ? '+dirty' : ''}, code ${short(w.code_sha256)}, node ${w.versions.node ?? DASH}, written ${w.time} on ${w.host}${p.changed_mid_run ? ' — **the controller code changed while the report was being written**' : ''}.`,
      ...(s.datasets ?? []).map((d) => {
        const where =
          d.source === 'hub'
            ? `${d.repo}@${d.revision ?? 'main'} = ${d.sha ?? DASH}${d.config ? ` (config ${d.config})` : ''}`
            : (d.path ?? DASH);
        const files = d.files
          .map(
            (f) => `${f.split}: ${f.path} (sha256 ${f.sha256.slice(0, 12)}, ${f.bytes.toLocaleString('en-US')} bytes)`,
          )
          .join('; ');
        return `Rows of task ${d.task} (${d.runs.length} run(s)): ${where}; ${files}.`;
      }),
      ...(s.numerics ?? []).map(
        (n) => `Numerics (${n.runs.length} run${n.runs.length === 1 ? '' : 's'}): ${numericsLabel(n)}.`,
      ),
      ...(s.numerics
        ? []
        : ["Numerics: not recorded by these runs' trainer (CPU capability, threads, GPU and dtype unknown)."]),
      flagged.length === 0
        ? 'Every run was produced by one controller version and one trainer version, unchanged mid-run, on one floating-point path.'
        : 'Code-version and numerics warnings:',
    ],
    ...(flagged.length > 0
      ? { list: flagged.map((x) => `**${x.kind}**: ${x.message} Runs: ${x.runs.join(', ')}`) }
      : {}),
    tables: [
      {
        columns: ['Run', 'Cell', 'Status', 'Controller (manifest)', 'Trainer (result)', 'Changed mid-run'],
        rows: s.runs.map((r) => {
          const changed = [
            r.provenance.controller?.changed_mid_run ? 'controller' : null,
            r.provenance.trainer?.changed_mid_run ? 'trainer' : null,
          ].filter(Boolean);
          return [
            r.run_id,
            r.cell_id,
            r.status,
            stamp(r.provenance.controller),
            stamp(r.provenance.trainer),
            changed.length > 0 ? `**yes** (${changed.join(', ')})` : 'no',
          ];
        }),
      },
    ],
  };
}

/**
 * The box the report opens with: each comparison the grid was built for, one sentence with its
 * figure, interval, control and n (findings.ts), and how many runs stand behind them.
 */
function summaryBox(s: ReportSummary): Section {
  const found = findings(s);
  const c = s.counts;
  return {
    id: 'summary',
    kind: 'summary',
    title: 'Findings',
    paragraphs: [
      // Controls that failed come before any finding: the findings below rest on them.
      ...s.warnings
        .filter((w) => (CONTROL_WARNING_KINDS as readonly string[]).includes(w.kind))
        .map((w) => `**Control failed — ${w.kind}**: ${w.message}`),
      `${c.finished} of ${c.runs} runs finished${c.failed ? `, ${c.failed} failed` : ''}${c.missing ? `, ${c.missing} missing` : ''}. Medians with ${Math.round(s.settings.confidence * 100)}% bootstrap intervals; exposure in bits, final phase, focal canaries. Each figure is one draw: read it with its n.`,
    ],
    list: found.length > 0 ? found.map((f) => f.text) : ['No finished run has focal canaries yet.'],
    tables: [],
  };
}

/** `visibility=redacted` inside the Cell text: the Visibility column beside it says it again. */
function repeatsCell(t: Table, column: number): boolean {
  const cell = t.columns.indexOf('Cell');
  if (cell < 0 || column === cell) return false;
  const axis = (t.columns[column] as string).toLowerCase();
  return t.rows.every((r) => (r[cell] ?? '').includes(`${axis}=${r[column] ?? ''}`));
}

/**
 * A table without what every row repeats: a column whose value is the same in every row, or
 * a parenthesised annotation every cell of a column ends with, is said once in a note; a column
 * that only repeats what the Cell column says (visibility=... beside Visibility) is dropped.
 */
export function compactTable(t: Table): Table {
  return compactGroup([t])[0] as Table;
}

/**
 * A section's tables compacted together: tables with the same columns (one per visibility, one
 * per compared axis) keep one column set, a column dropped only when every row of every one of
 * them repeats it, and what they all repeat is said once, under the last of them.
 */
export function compactTables(tables: Table[]): Table[] {
  const byColumns = new Map<string, number[]>();
  tables.forEach((t, i) => {
    const key = t.columns.join('\u0000');
    byColumns.set(key, [...(byColumns.get(key) ?? []), i]);
  });
  const out = [...tables];
  for (const indices of byColumns.values()) {
    const compacted = compactGroup(indices.map((i) => tables[i] as Table));
    indices.forEach((i, j) => {
      out[i] = compacted[j] as Table;
    });
  }
  return out;
}

/** Tables with one column set, compacted as one: see compactTables. */
function compactGroup(tables: Table[]): Table[] {
  const first = tables[0];
  const all = tables.flatMap((t) => t.rows);
  if (!first || all.length < 2) return tables;
  const shared: string[] = [];
  const keep: number[] = [];
  const rows = tables.map((t) => t.rows.map((r) => [...r]));
  const annotations: string[][] = tables.map(() => []);
  first.columns.forEach((name, i) => {
    const values = all.map((r) => r[i] ?? '');
    if (name === 'Cell' || name === 'Run') {
      keep.push(i);
      return;
    }
    if (tables.every((t) => t.rows.length === 0 || repeatsCell(t, i))) return;
    if (values.every((v) => v === values[0])) {
      // One table: with its own annotations, in column order, under one "In every row".
      (tables.length === 1 ? (annotations[0] as string[]) : shared).push(
        values[0] !== DASH ? `${name}: ${values[0]}.` : `${name}: ${DASH} (not in this grid).`,
      );
      return;
    }
    // An annotation every cell of the column ends with, table by table (the column stays).
    rows.forEach((tableRows, j) => {
      if (tableRows.length < 2) return;
      const own = tableRows.map((r) => r[i] ?? '');
      const suffix = /\s\(([^()]*(?:\([^()]*\)[^()]*)*)\)$/.exec(own[0] as string)?.[0];
      if (suffix && own.every((v) => v.endsWith(suffix) || v === DASH)) {
        (annotations[j] as string[]).push(`${name}: ${suffix.trim().slice(1, -1)}.`);
        for (const r of tableRows) if (r[i] !== DASH) r[i] = (r[i] as string).slice(0, -suffix.length);
      }
    });
    keep.push(i);
  });
  const where = tables.length === 1 ? 'In every row' : `In every row of these ${tables.length} tables`;
  return tables.map((t, j) => {
    const own = annotations[j] as string[];
    const notes = [
      ...(t.notes ?? []),
      ...(own.length > 0 ? [`In every row${tables.length === 1 ? '' : ' of this table'} — ${own.join(' ')}`] : []),
      ...(j === tables.length - 1 && shared.length > 0 ? [`${where} — ${shared.join(' ')}`] : []),
    ];
    return {
      ...t,
      columns: keep.map((i) => t.columns[i] as string),
      rows: (rows[j] as string[][]).map((r) => keep.map((i) => r[i] as string)),
      ...(notes.length ? { notes } : {}),
    };
  });
}

// The summary box states each of their comparisons in a sentence; the full tables and plots are a click away.
const FOLDED = new Set([
  'recovery',
  'paired',
  'auxiliary',
  'overview',
  'checkpoints',
  'utility',
  'failed-missing',
  'provenance',
]);

const BOUND_NAMES: Record<string, string> = {
  clopper_pearson: 'Clopper–Pearson',
  one_run: 'one run',
  gdp: 'Gaussian DP',
  fdp_one_run: 'f-DP one run',
};

/** A bound's threshold strategy in words (`chosen` where the bound is absent): `bonferroni` as the bound's own search, else its label. */
function strategyOf(bound: { threshold_strategy?: string } | null, chosen: string, bonferroni: string): string {
  const label = bound?.threshold_strategy ?? chosen;
  return label === 'bonferroni' ? bonferroni : label;
}

/** Membership and ε readouts per run, only for an audit whose manifests randomize inclusion. */
function privacy(s: ReportSummary): Section | null {
  if (!s.privacy || s.privacy.length === 0) return null;
  const ci = (i: { estimate: number; lo: number; hi: number } | null): string =>
    i ? `${num(i.estimate)} [${num(i.lo)}, ${num(i.hi)}]` : DASH;
  const first = s.privacy[0] as NonNullable<ReportSummary['privacy']>[number];
  const chosen = first.epsilon.threshold_strategy;
  return {
    id: 'privacy',
    title: 'Privacy readouts',
    paragraphs: [
      privacyNote(first),
      `Two more ε lower bounds at the same δ and confidence (docs/metrics.md, Privacy readouts): Gaussian DP (μ from Clopper–Pearson bounds on FPR and FNR at every ROC-hull threshold, Bonferroni over 2 × the hull's thresholds, converted to ε; Nasr et al. 2023) and the f-DP one-run bound of Mahloujifar et al. (2024), refused like the one-run bound unless inclusion was randomized; its threshold strategy: ${first.epsilon.threshold_strategy}. AUC (hull) is the area under the ROC convex hull (randomizing between thresholds allowed), never below ½.`,
      `Threshold strategy of each ε bound (all at δ = ${first.epsilon.delta}, ${Math.round(first.epsilon.confidence * 100)}% confidence): Clopper–Pearson — ${strategyOf(first.epsilon.clopper_pearson, chosen, 'Bonferroni over every distinct score')}; one run — ${strategyOf(first.epsilon.one_run, chosen, 'Bonferroni over the guess counts r ∈ {m/8, m/4, m/2, m}')}; Gaussian DP — Bonferroni over the ROC hull's thresholds (always: jax_privacy gives this bound no other strategy); f-DP one run — ${first.epsilon.fdp_one_run?.threshold_strategy ?? chosen} (report --threshold-strategy or the grid's analysis.threshold_strategy: bonferroni, split — choose on half the canaries, audit the other half —, multisplit — the median of 100 splits at half the level).`,
      ...(s.epsilon_max ?? []).map(
        (x) =>
          `**Largest ε bound (${BOUND_NAMES[x.bound] ?? x.bound})**: ${num(x.epsilon)}${x.run_id ? ` (${x.run_id}, ${x.cell_id})` : ''} over the ${x.searched} run${x.searched === 1 ? '' : 's'} searched — picking the largest is a search, so each run's bound here is at ${(100 * x.confidence_each).toPrecision(4)}% (1 − ${num(1 - x.confidence)}/${x.searched}, Bonferroni) and the largest holds at ${Math.round(x.confidence * 100)}% after the search; the table's per-run bounds are at ${Math.round(x.confidence * 100)}% each and are not selection-corrected.`,
      ),
    ],
    tables: [
      ...(s.privacy_auc && s.privacy_auc.length > 0
        ? [
            {
              caption: `AUC per cell over its runs: the mean of the runs' own AUCs, with the crossed canary × run ${Math.round((s.privacy_auc[0]?.confidence ?? 0.95) * 100)}% interval (runs and canaries resampled two-way, as the exposure medians; docs/metrics.md, Privacy readouts).`,
              columns: ['Cell', 'Probe', 'Runs', 'n in · out', 'AUC [CI]', 'Resampling', 'se (df)'],
              rows: s.privacy_auc.map((a) => [
                a.cell,
                a.probe_kind,
                String(a.runs),
                `${a.n_in} · ${a.n_out}`,
                ci(a),
                a.design,
                a.se === null ? DASH : `${num(a.se, 3)} (${a.df === null ? DASH : num(a.df, 1)})`,
              ]),
            },
          ]
        : []),
      {
        columns: [
          'Run',
          'Cell',
          'Inclusion',
          'n in · out',
          'AUC [95% CI]',
          'AUC (hull)',
          'TPR @ 1% FPR',
          'TPR @ 0.1% FPR',
          'ε ≥ (Clopper–Pearson)',
          'ε ≥ (one run)',
          'ε ≥ (GDP)',
          'ε ≥ (f-DP one run)',
        ],
        rows: s.privacy.map((p) => {
          const tpr = (f: number): string => {
            const t = p.tpr_at_fpr.find((x) => x.fpr === f);
            return t
              ? `${t.k}/${t.n} (${num(t.tpr)}) [${num(t.lo)}, ${num(t.hi)}]; FPR ${num(t.achieved_fpr, 3)} (resolution ${num(t.resolution, 3)})`
              : DASH;
          };
          const one = p.epsilon.one_run
            ? `${num(p.epsilon.one_run.epsilon)} (${p.epsilon.one_run.correct}/${p.epsilon.one_run.guesses} guesses right, m = ${p.epsilon.one_run.m}${p.epsilon.one_run.abstained ? `, ${p.epsilon.one_run.abstained} tied at a cut: no guess` : ''})`
            : `refused: ${p.epsilon.one_run_refused ?? DASH}`;
          const gdp = p.epsilon.gdp ? `${num(p.epsilon.gdp.epsilon)} (μ ≥ ${num(p.epsilon.gdp.mu)})` : DASH;
          const fdp = p.epsilon.fdp_one_run
            ? `${num(p.epsilon.fdp_one_run.epsilon)}${p.epsilon.fdp_one_run.guesses ? ` (${p.epsilon.fdp_one_run.correct}/${p.epsilon.fdp_one_run.guesses} guesses right, m = ${p.epsilon.fdp_one_run.m})` : ''}`
            : p.epsilon.one_run_refused
              ? 'refused'
              : DASH;
          return [
            p.run_id,
            p.cell_id,
            p.inclusion,
            `${p.n_in} · ${p.n_out}`,
            ci(p.auc),
            p.auc_hull === null ? DASH : num(p.auc_hull),
            tpr(0.01),
            tpr(0.001),
            p.epsilon.clopper_pearson ? num(p.epsilon.clopper_pearson.epsilon) : DASH,
            one,
            gdp,
            fdp,
          ];
        }),
      },
    ],
  };
}

/** Extrapolated beside rank exposure, only when the report extrapolated a sampled space. */
function extrapolation(s: ReportSummary): Section | null {
  if (!s.extrapolation || s.extrapolation.length === 0) return null;
  return {
    id: 'extrapolation',
    title: 'Extrapolated exposure',
    paragraphs: [
      `A sampled candidate space caps rank exposure at log2|C| (${num((s.extrapolation[0] as NonNullable<ReportSummary['extrapolation']>[number]).rank_ceiling)} bits here). Extrapolated exposure fits a skew-normal to each probe's decoy scores and reads the true code's score from the fitted tail (TF Privacy's compute_exposure_extrapolation; docs/metrics.md, Extrapolated exposure), final phase. A fit that fails its diagnostics is never shown above the ceiling: it is withheld, and the probe enters the median at its rank exposure. Validated on the exhaustive 4-digit space (the tiny backend and a random-initialised hf model), it ran a median 1.2–1.6 bits low above 10 bits, up to 3.9 on single probes, with no fit flagged (the departure lies beyond the sampled decoys): read values above the ceiling as rough and likely low.`,
    ],
    tables: [
      {
        columns: [
          'Cell',
          'Role',
          'Probe',
          'n',
          'Ranked first',
          'Rank exposure (median)',
          'Extrapolated (median)',
          'Above the ceiling',
          'Fits ok · flagged · withheld · unfit',
        ],
        rows: s.extrapolation.map((g) => [
          g.cell,
          g.role,
          g.probe_kind,
          String(g.n),
          String(g.at_ceiling),
          num(g.rank_exposure_median),
          num(g.extrapolated_median),
          String(g.above_ceiling),
          `${g.ok} · ${g.flagged} · ${g.withheld} · ${g.unfit}`,
        ]),
      },
    ],
  };
}

export function buildDocument(s: ReportSummary): ReportDocument {
  const sections = [
    summaryBox(s),
    sequentialLooks(s),
    exposureVsDose(s),
    controls(s),
    recovery(s),
    paired(s),
    auxiliary(s),
    checkpoints(s),
    privacy(s),
    extrapolation(s),
    canaryDesignsSection(s.canary_designs),
    utility(s),
    notFinished(s),
    overview(s),
    provenance(s),
  ];
  return {
    title: `canary-audit report: ${s.audit.name}`,
    sections: sections
      .filter((x): x is Section => x !== null)
      .map((sec) => ({ ...sec, tables: compactTables(sec.tables), ...(FOLDED.has(sec.id) ? { folded: true } : {}) })),
  };
}
