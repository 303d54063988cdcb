import * as vega from 'vega';
import { compile, type TopLevelSpec } from 'vega-lite';
import { log } from '../log.js';
import { PROBE_KIND_ORDER } from '../metrics/observation.js';
import type { GroupSummary } from '../metrics/aggregate.js';
import type { ReportSummary } from './summary.js';
import { comparisonTitle, orderedComparisons } from './document.js';

/**
 * Report plots as Vega-Lite specs, rendered to SVG in Node by Vega (no browser, no canvas: text
 * widths are estimated). Each spec is kept beside its SVG so a figure can be restyled for a paper
 * without recomputing anything.
 */
export interface Plot {
  id: string;
  title: string;
  spec: TopLevelSpec;
}

/** One layer of a layered Vega-Lite spec. */
type Layer = Extract<TopLevelSpec, { layer: unknown }>['layer'][number];

const WIDTH = 300;
const HEIGHT = 200;
/** Fonts sized to read at the page's body text size (Vega's defaults are 10–11 px). */
const FONTS = {
  axis: { labelFontSize: 12, titleFontSize: 13 },
  header: { labelFontSize: 13, titleFontSize: 14 },
  legend: { labelFontSize: 12, titleFontSize: 13, symbolSize: 120 },
};

const CONTROL_LABEL = 'held-out control: median, 95% CI';
const CEILING_LABEL = 'ceiling log2|C|';

/**
 * The ceiling as the legend names it, with the space it comes from: `ceiling log2|C| = log2
 * 20,000 = 14.29 (true code + 19,999 sampled decoys)`, so a sampled space's ceiling is never
 * read as the full code space's.
 */
export function ceilingLabel(space: { kind: 'exhaustive' | 'sampled'; size: number; ceiling: number }): string {
  const size = space.size.toLocaleString('en-US');
  const from =
    space.kind === 'sampled'
      ? ` (true code + ${(space.size - 1).toLocaleString('en-US')} sampled decoys)`
      : ` (all ${size} codes)`;
  return `${CEILING_LABEL} = log2 ${size} = ${space.ceiling.toFixed(2)}${from}`;
}

/** The probe kind plotted: hidden when present (the recall measurement), else the first kind. */
function plottedKind(groups: GroupSummary[]): GroupSummary['probe_kind'] | null {
  const kinds = new Set(groups.map((g) => g.probe_kind));
  return PROBE_KIND_ORDER.find((k) => kinds.has(k)) ?? null;
}

function doseAxis(doses: number[]): Record<string, unknown> {
  return {
    field: 'dose',
    type: 'quantitative',
    title: 'dose (appearances in training)',
    scale: { type: 'log', base: 2, nice: false, domain: [Math.min(...doses) / 1.3, Math.max(...doses) * 1.3] },
    axis: { values: [...new Set(doses)].sort((a, b) => a - b), format: 'd' },
  };
}

/**
 * The held-out control drawn under the focal series: a grey band across doses, plus a grey
 * interval and tick at each dose so the control stays visible when the grid has a single dose.
 * The band carries the legend entry (a `fill` of its own, apart from the cells' colours).
 */
function controlLayers(x: Record<string, unknown>, y: Record<string, unknown>): Layer[] {
  const legend = {
    field: 'control_label',
    type: 'nominal',
    scale: { range: ['#777'] },
    legend: { title: 'controls', symbolType: 'square', symbolOpacity: 0.5, orient: 'bottom', direction: 'vertical' },
  };
  // Only rows that carry a control: the exposure plot's run-median rows (and a cell without a
  // held-out cohort) have none, and would otherwise add an `undefined` legend entry and NaN marks.
  const band = [{ filter: 'isValid(datum.control_lo) && isValid(datum.control_hi) && isValid(datum.control_label)' }];
  return [
    {
      transform: band,
      mark: { type: 'area', opacity: 0.15 },
      encoding: {
        x,
        y: { field: 'control_lo', ...y },
        y2: { field: 'control_hi' },
        detail: { field: 'series' },
        fill: legend,
      },
    },
    {
      transform: band,
      mark: { type: 'rule', color: '#999', strokeWidth: 6, opacity: 0.5 },
      encoding: { x, y: { field: 'control_lo', ...y }, y2: { field: 'control_hi' } },
    },
    {
      transform: [{ filter: 'isValid(datum.control)' }],
      mark: { type: 'tick', orient: 'horizontal', color: '#666', thickness: 2, size: 16 },
      encoding: { x, y: { field: 'control', ...y } },
    },
  ] as Layer[];
}

/** The ceiling as a dashed rule with its own legend entry. */
function ceilingLayer(y: Record<string, unknown>): Layer {
  return {
    mark: { type: 'rule', color: '#333' },
    encoding: {
      y: { field: 'ceiling', aggregate: 'max', ...y },
      strokeDash: {
        field: 'ceiling_label',
        type: 'nominal',
        scale: { range: [[5, 4]] },
        legend: {
          title: 'reference',
          symbolType: 'stroke',
          symbolStrokeColor: '#333',
          orient: 'bottom',
          direction: 'vertical',
        },
      },
    },
  } as Layer;
}

/** The dose plots' skeleton: one panel per visibility (and per `row` value), the given layers, legends below. */
function byVisibility(
  rows: Record<string, unknown>[],
  layer: Layer[],
  title: string,
  row?: Record<string, unknown>,
): TopLevelSpec {
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    // The probe kind (and what is plotted) stands over the figure, not only in its caption.
    title: { text: title, anchor: 'start', fontSize: 14 },
    data: { values: rows },
    // Panels in the tables' order; each with its own axes (a shared scale would leave all but
    // the outer panels without one).
    facet: {
      column: {
        field: 'visibility',
        type: 'nominal',
        title: 'visibility',
        sort: [...new Set(rows.map((r) => r.visibility))],
      },
      ...(row ? { row } : {}),
    },
    spec: { width: WIDTH, height: HEIGHT, layer },
    resolve: { axis: { x: 'independent', y: 'independent' } },
    config: {
      legend: { orient: 'bottom', columns: 1, labelLimit: 600, ...FONTS.legend },
      axis: FONTS.axis,
      header: FONTS.header,
      title: { fontSize: 14 },
    },
  } as TopLevelSpec;
}

/** The ceiling's value written on its line, inside each panel. */
function ceilingText(y: Record<string, unknown>): Layer {
  return {
    transform: [
      { aggregate: [{ op: 'max', field: 'ceiling', as: 'ceiling' }], groupby: ['visibility'] },
      { calculate: "'ceiling ' + format(datum.ceiling, '.2f') + ' bits'", as: 'ceiling_text' },
    ],
    mark: { type: 'text', align: 'left', baseline: 'bottom', dx: 4, dy: -3, fontSize: 12, color: '#333' },
    encoding: { x: { value: 0 }, y: { field: 'ceiling', ...y }, text: { field: 'ceiling_text', type: 'nominal' } },
  } as Layer;
}

/** Each cell's interval (a rule from lo to hi) and its estimate (a line with points), coloured by cell in report order. */
function estimateLayers(
  x: Record<string, unknown>,
  y: Record<string, unknown>,
  estimate: string,
  series: string[],
): Layer[] {
  const color = { field: 'series', type: 'nominal', title: 'cell', sort: series };
  return [
    {
      transform: [{ filter: 'isValid(datum.lo) && isValid(datum.hi)' }],
      mark: { type: 'rule', strokeWidth: 1.5 },
      encoding: { x, y: { field: 'lo', ...y }, y2: { field: 'hi' }, color },
    },
    {
      transform: [{ filter: `isValid(datum[${JSON.stringify(estimate)}])` }],
      mark: { type: 'line', point: true },
      encoding: { x, y: { field: estimate, ...y }, color },
    },
  ] as Layer[];
}

/** Series names in the order the groups come (the report's order: values as values, 4 before 16). */
function seriesOrder(rows: { series: string }[]): string[] {
  return [...new Set(rows.map((r) => r.series))];
}

function exposurePlot(groups: GroupSummary[], kind: string): Plot | null {
  const rows = groups
    .filter((g) => g.dose !== null && g.inserted.exposure)
    .map((g) => ({
      series: g.label,
      visibility: g.visibility ?? '—',
      dose: g.dose,
      median: g.inserted.exposure?.estimate,
      lo: g.inserted.exposure?.lo,
      hi: g.inserted.exposure?.hi,
      ceiling: g.space.ceiling,
      // Short in the legend (a long one would shrink the plot's text); the caption says the space.
      ceiling_label: `${CEILING_LABEL} = ${g.space.ceiling.toFixed(2)}`,
      control: g.controls.held_out?.exposure?.estimate ?? null,
      control_lo: g.controls.held_out?.exposure?.lo ?? null,
      control_hi: g.controls.held_out?.exposure?.hi ?? null,
      control_label: CONTROL_LABEL,
    }));
  if (rows.length === 0) return null;
  const x = doseAxis(rows.map((r) => r.dose as number));
  const ceiling = Math.max(...rows.map((r) => r.ceiling));
  const y = { type: 'quantitative', title: 'median exposure (bits)', scale: { domain: [0, Math.ceil(ceiling)] } };
  const labels = [
    ...new Set(groups.filter((g) => g.dose !== null && g.inserted.exposure).map((g) => ceilingLabel(g.space))),
  ];
  // The run-to-run spread: each run's own median as an open point (rows of their own: the other
  // layers skip them, their fields being null).
  const runRows = groups
    .filter((g) => g.dose !== null && g.inserted.exposure && g.inserted.run_medians.length > 1)
    .flatMap((g) =>
      g.inserted.run_medians.map((r) => ({
        series: g.label,
        visibility: g.visibility ?? '—',
        dose: g.dose,
        run_median: r.median,
        ceiling: g.space.ceiling,
        ceiling_label: `${CEILING_LABEL} = ${g.space.ceiling.toFixed(2)}`,
      })),
    );
  const series = seriesOrder(rows);
  const strip = {
    mark: { type: 'point', filled: false, size: 30, opacity: 0.8 },
    encoding: {
      x,
      y: { field: 'run_median', ...y },
      color: { field: 'series', type: 'nominal', title: 'cell', sort: series },
    },
  } as Layer;
  return {
    id: 'exposure-vs-dose',
    title: `Exposure vs dose (${kind} probes, focal canaries, median and 95% CI${runRows.length > 0 ? '; open points: each run’s own median' : ''}; grey: held-out control median and 95% CI; dashed: ${labels.join('; ')})`,
    spec: byVisibility(
      [...rows, ...runRows],
      [
        ...controlLayers(x, y),
        ceilingLayer(y),
        ceilingText(y),
        ...estimateLayers(x, y, 'median', series),
        ...(runRows.length > 0 ? [strip] : []),
      ],
      `Exposure vs dose · ${kind} probes · focal canaries`,
    ),
  };
}

function recoveryPlot(groups: GroupSummary[], kind: string): Plot | null {
  const rows = groups
    .filter((g) => g.dose !== null && g.inserted.recovery.prefill)
    .map((g) => ({
      series: g.label,
      visibility: g.visibility ?? '—',
      dose: g.dose,
      rate: g.inserted.recovery.prefill?.rate,
      lo: g.inserted.recovery.prefill?.lo,
      hi: g.inserted.recovery.prefill?.hi,
      control: g.controls.held_out?.recovery.prefill?.rate ?? null,
      control_lo: g.controls.held_out?.recovery.prefill?.lo ?? null,
      control_hi: g.controls.held_out?.recovery.prefill?.hi ?? null,
      control_label: CONTROL_LABEL.replace('median', 'rate'),
    }));
  if (rows.length === 0) return null;
  const x = doseAxis(rows.map((r) => r.dose as number));
  const y = { type: 'quantitative', title: 'exact recovery (greedy, prefill)', scale: { domain: [0, 1] } };
  return {
    id: 'recovery-vs-dose',
    title: `Exact recovery vs dose (${kind} probes, focal canaries, Wilson 95% CI; grey: held-out control)`,
    spec: byVisibility(
      rows,
      [...controlLayers(x, y), ...estimateLayers(x, y, 'rate', seriesOrder(rows))],
      `Exact recovery vs dose · ${kind} probes · focal canaries`,
    ),
  };
}

/**
 * Substituted probes (another code shown in the prompt): the rate of copying the shown code and
 * the rate of recovering the true one, per dose, one row of panels each, beside the held-out
 * canaries' rates (how much a model copies for any record, trained on or not).
 */
function substitutedPlot(groups: GroupSummary[]): Plot | null {
  const measures = [
    {
      name: 'copied the shown code',
      pick: (a: GroupSummary['inserted'] | null | undefined) => a?.copy?.prefill ?? null,
    },
    {
      name: 'recovered the true code',
      pick: (a: GroupSummary['inserted'] | null | undefined) => a?.recovery.prefill ?? null,
    },
  ];
  const rows = measures.flatMap((m) =>
    groups
      .filter((g) => g.probe_kind === 'substituted' && g.dose !== null && m.pick(g.inserted))
      .map((g) => {
        const p = m.pick(g.inserted);
        const c = m.pick(g.controls.held_out);
        return {
          measure: m.name,
          series: g.label,
          visibility: g.visibility ?? '—',
          dose: g.dose,
          rate: p?.rate,
          lo: p?.lo,
          hi: p?.hi,
          control: c?.rate ?? null,
          control_lo: c?.lo ?? null,
          control_hi: c?.hi ?? null,
          control_label: CONTROL_LABEL.replace('median', 'rate'),
        };
      }),
  );
  if (rows.length === 0) return null;
  const x = doseAxis(rows.map((r) => r.dose as number));
  const y = { type: 'quantitative', title: 'rate (greedy, prefill)', scale: { domain: [0, 1] } };
  return {
    id: 'substituted-vs-dose',
    title:
      'Substituted probes vs dose (focal canaries, another code shown in the prompt: copy rate of the shown code and recovery of the true code, Wilson 95% CI, a copy rate pooling several runs design-Wilson (see Recovery); grey: held-out control)',
    spec: byVisibility(
      rows,
      [...controlLayers(x, y), ...estimateLayers(x, y, 'rate', seriesOrder(rows))],
      'Substituted probes vs dose · focal canaries',
      {
        field: 'measure',
        type: 'nominal',
        title: null,
        sort: measures.map((m) => m.name),
      },
    ),
  };
}

function pairedPlot(summary: ReportSummary, kind: string): Plot | null {
  const chosen = summary.paired.filter((p) => p.phase === 'final' && p.probe_kind === kind);
  const order = orderedComparisons(chosen);
  const rows = chosen.map((p) => ({
    comparison: comparisonTitle(p),
    // Vega estimates label widths generously without a canvas: keep row labels short.
    row: `${p.label} · ${p.cohort === 'held_out' ? 'held-out' : p.cohort}${p.dose === null || 'dose' in p.context ? '' : ` · dose ${p.dose}`}`,
    cohort: p.cohort === 'held_out' ? 'held-out (null)' : p.cohort,
    estimate: p.difference.estimate,
    lo: p.difference.lo,
    hi: p.difference.hi,
    pairs: p.n_pairs,
    rose: p.rose,
  }));
  if (rows.length === 0) return null;
  const y = { field: 'row', type: 'nominal', title: null, sort: null, axis: { labelLimit: 640 } };
  const x = { type: 'quantitative', title: 'median paired Δ exposure (bits), later − earlier value' };
  return {
    id: 'paired-differences',
    title: `Paired differences (${kind} probes, same canary id and code, 95% CI; grey: held-out canaries, the null)`,
    spec: {
      $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
      title: { text: `Paired differences · ${kind} probes`, anchor: 'start', fontSize: 14 },
      data: { values: rows },
      facet: {
        row: {
          field: 'comparison',
          type: 'nominal',
          title: null,
          sort: order,
          header: {
            labelAngle: 0,
            labelAlign: 'left',
            labelAnchor: 'start',
            labelOrient: 'top',
            labelFontWeight: 'bold',
          },
        },
      },
      spec: {
        width: 360,
        height: { step: 22 },
        layer: [
          {
            mark: { type: 'rule', color: '#333', strokeDash: [3, 3] },
            encoding: { x: { datum: 0, type: 'quantitative' } },
          },
          {
            mark: { type: 'rule', strokeWidth: 1.5 },
            encoding: { y, x: { field: 'lo', ...x }, x2: { field: 'hi' }, color: { field: 'cohort', type: 'nominal' } },
          },
          {
            mark: { type: 'point', filled: true, size: 60 },
            encoding: {
              y,
              x: { field: 'estimate', ...x },
              color: {
                field: 'cohort',
                type: 'nominal',
                title: 'canaries',
                scale: { range: ['#1f77b4', '#999999', '#ff7f0e', '#2ca02c'] },
              },
            },
          },
        ],
      },
      // Every panel with its own x axis, not only the bottom one.
      resolve: { scale: { y: 'independent' }, axis: { x: 'independent' } },
      config: {
        legend: { orient: 'bottom', ...FONTS.legend },
        axis: FONTS.axis,
        header: FONTS.header,
        title: { fontSize: 14 },
      },
    } as TopLevelSpec,
  };
}

export function buildPlots(summary: ReportSummary): Plot[] {
  const focal = summary.groups.filter((g) => g.cohort === 'focal' && g.phase === 'final');
  const kind = plottedKind(focal);
  if (!kind) return [];
  const groups = focal.filter((g) => g.probe_kind === kind);
  const plots = [
    exposurePlot(groups, kind),
    recoveryPlot(groups, kind),
    substitutedPlot(focal),
    pairedPlot(summary, kind),
  ].filter((p): p is Plot => p !== null);
  // Every figure names the candidate space its exposures and ranks come from.
  const spaces = [...new Set(focal.map((g) => ceilingLabel(g.space)))];
  return plots.map((p) =>
    p.title.includes(CEILING_LABEL) ? p : { ...p, title: `${p.title} · candidates: ${spaces.join('; ')}` },
  );
}

type VegaLogger = NonNullable<NonNullable<Parameters<typeof compile>[1]>['logger']>;

/**
 * Vega and Vega-Lite print their notes on the console; route them to the process log instead
 * (stderr and stdout belong to the command), warnings at debug level: they concern layout.
 */
function vegaLogger(): VegaLogger {
  let level = 2;
  const text = (args: unknown[]): string => args.map((a) => (a instanceof Error ? a.message : String(a))).join(' ');
  return {
    level(value?: number) {
      if (value === undefined) return level;
      level = value;
      return this;
    },
    error(...args: unknown[]) {
      log.warn({ vega: text(args) }, 'plot rendering error');
      return this;
    },
    warn(...args: unknown[]) {
      log.debug({ vega: text(args) }, 'plot rendering warning');
      return this;
    },
    info() {
      return this;
    },
    debug() {
      return this;
    },
  };
}

/** Compile Vega-Lite to Vega and render it headless to an SVG string. */
export async function renderSvg(spec: TopLevelSpec): Promise<string> {
  const logger = vegaLogger();
  const view = new vega.View(vega.parse(compile(spec, { logger }).spec), { renderer: 'none', logger });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}
