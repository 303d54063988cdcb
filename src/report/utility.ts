import { createHash } from 'node:crypto';
import { dirname, isAbsolute, relative, resolve } from 'node:path';
import { artifactError, quoteValue, UserInputError } from '../errors.js';
import { readInside, ReadBoundaryError } from '../fs/read-boundary.js';
import { bootstrapMedian, type BootstrapOptions, type MedianInterval } from '../metrics/bootstrap.js';
import type { GroupSummary } from '../metrics/aggregate.js';
import { exposuresByRun } from '../metrics/arm.js';
import { canaryKey, PROBE_KIND_ORDER, type Observation } from '../metrics/observation.js';
import { median } from '../metrics/statistics.js';
import {
  BOX_METRICS,
  GENERATION_METRICS,
  generationMetrics,
  rowScores,
  type Box,
  utilityInterval,
  type GenerationMetric,
  type RunScores,
  type UtilityInterval,
} from '../metrics/utility.js';
import type { ProbeKind, UtilityMetric } from '../contracts/manifest.js';
import type { Result, UtilityOutputs } from '../contracts/result.js';
import type { LoadedRun } from './load-audit.js';

/**
 * Task utility beyond loss, in the report: the trainer's greedy replies to the utility rows
 * (utility/base.jsonl, utility/final.jsonl, checked against result.json's sha256 and count) scored
 * against the rows' targets (utility.jsonl, checked against the manifest's sha256 and count), per
 * run, per utility group, and the overview's headline beside the focal exposure.
 */
export interface UtilityScores {
  metrics: GenerationMetric[];
  rows: number;
  /** Per metric, per-row scores; null when the phase's replies were not written. */
  base: Partial<Record<GenerationMetric, number[]>> | null;
  final: Partial<Record<GenerationMetric, number[]>> | null;
}

/** One metric of one run or one group: base → final. */
export interface UtilityMetricSummary {
  metric: GenerationMetric;
  base: UtilityInterval | null;
  final: UtilityInterval | null;
  /** final − base (estimates). */
  delta: number | null;
}

export interface UtilityHeadline {
  task: string;
  /** The task's generation metric (accuracy first, then exact match, then token F1), or loss. */
  metric: UtilityMetric;
  /** Runs behind the utility figures: those holding the exposure figure's canaries (all finished runs of the task when none). */
  runs: string[];
  base: UtilityInterval | null;
  final: UtilityInterval | null;
  /** Medians over the same runs. */
  base_loss: number | null;
  final_loss: number | null;
  exposure: {
    visibility: string | null;
    dose: number;
    probe_kind: ProbeKind;
    median: MedianInterval;
    ceiling: number;
    n_canaries: number;
    n_runs: number;
  } | null;
  text: string;
}

function sha256(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** A path inside `root`, or an error naming the field. */
function inside(root: string, rel: string, file: string, field: string): string {
  const path = resolve(root, rel);
  const r = relative(root, path);
  if (r.startsWith('..') || isAbsolute(r))
    throw artifactError(file, field, `${quoteValue(rel)} points outside ${root}`);
  return path;
}

/** Largest utility rows or outputs file read, bytes. */
const MAX_LINES_BYTES = 1024 * 1024 * 1024;

async function readChecked(
  root: string,
  path: string,
  sha: string,
  count: number,
  owner: string,
  what: string,
): Promise<string[]> {
  let bytes: Buffer;
  try {
    // The read boundary: inside the run's folder after links, a regular file (no FIFO), capped.
    bytes = await readInside(root, path, { maxBytes: MAX_LINES_BYTES, what });
  } catch (error) {
    if (error instanceof ReadBoundaryError && !/: no such /.test(error.message)) throw error;
    const code =
      (error instanceof ReadBoundaryError
        ? (error.cause as NodeJS.ErrnoException | undefined)?.code
        : (error as NodeJS.ErrnoException).code) ?? String(error);
    throw new UserInputError(`${what} cannot be read (${code}); the run's output is incomplete — rerun it`, {
      location: { file: path },
      code: 'E_BAD_UTILITY',
      cause: error,
    });
  }
  const got = sha256(bytes);
  if (got !== sha) {
    throw new UserInputError(
      `${what} sha256 ${got.slice(0, 12)}… differs from ${sha.slice(0, 12)}… in ${owner}: the file changed after it was written — rerun the run`,
      {
        location: { file: path },
        code: 'E_BAD_UTILITY',
      },
    );
  }
  const lines = bytes.toString('utf8').split('\n');
  if (lines.at(-1) === '') lines.pop();
  if (lines.length !== count)
    throw new UserInputError(`${what} holds ${lines.length} lines but ${owner} promises ${count}`, {
      location: { file: path },
      code: 'E_BAD_UTILITY',
    });
  return lines;
}

function parseLine(path: string, n: number, line: string): Record<string, unknown> {
  try {
    const v = JSON.parse(line) as unknown;
    if (typeof v === 'object' && v !== null && !Array.isArray(v)) return v as Record<string, unknown>;
  } catch {
    // reported below
  }
  throw new UserInputError(`line ${n + 1} is not a JSON object`, {
    location: { file: path, line: n + 1 },
    code: 'E_BAD_UTILITY',
  });
}

async function readReplies(
  run: LoadedRun,
  resultPath: string,
  field: string,
  ref: UtilityOutputs,
  rows: number,
): Promise<string[]> {
  const path = inside(run.outputDir, ref.path, resultPath, `${field}.path`);
  if (ref.count !== rows)
    throw artifactError(resultPath, `${field}.count`, `${ref.count} replies but utility.jsonl has ${rows} rows`);
  const lines = await readChecked(run.outputDir, path, ref.sha256, ref.count, 'result.json', 'utility outputs file');
  return lines.map((line, n) => {
    const o = parseLine(path, n, line);
    if (o.i !== n || typeof o.text !== 'string') {
      throw new UserInputError(
        `line ${n + 1} must be {"i": ${n}, "text": "<reply>"}, got ${quoteValue(line.slice(0, 80))}`,
        { location: { file: path, line: n + 1 }, code: 'E_BAD_UTILITY' },
      );
    }
    return o.text;
  });
}

/**
 * The per-row scores of a finished run whose manifest asks for generation metrics (null otherwise):
 * targets from utility.jsonl, replies from the outputs files result.json names.
 */
export async function readUtilityScores(run: LoadedRun, result: Result): Promise<UtilityScores | null> {
  const ref = run.manifest?.utility ?? null;
  const metrics = generationMetrics(ref?.metrics);
  if (!ref || !run.manifest || metrics.length === 0) return null;
  const manifestPath = run.manifest.path;
  const rowsPath = inside(dirname(manifestPath), ref.path, manifestPath, 'utility.path');
  const needsBox = metrics.some((m) => BOX_METRICS.includes(m));
  const boxes: (Box | null)[] = [];
  const targets = (
    await readChecked(dirname(manifestPath), rowsPath, ref.sha256, ref.count, 'manifest.json', 'utility rows file')
  ).map((line, n) => {
    const row = parseLine(rowsPath, n, line);
    if (typeof row.target !== 'string')
      throw new UserInputError(`line ${n + 1} has no string target`, {
        location: { file: rowsPath, line: n + 1 },
        code: 'E_BAD_UTILITY',
      });
    const box = row.box;
    const valid =
      Array.isArray(box) && box.length === 4 && box.every((v) => typeof v === 'number' && Number.isFinite(v));
    if (needsBox && !valid)
      throw new UserInputError(`line ${n + 1} field box: point_in_box needs [x0, y0, x1, y1], got ${quoteValue(box)}`, {
        location: { file: rowsPath, line: n + 1 },
        code: 'E_BAD_UTILITY',
      });
    boxes.push(valid ? (box as unknown as Box) : null);
    return row.target;
  });
  const phase = async (field: 'base_outputs' | 'final_outputs'): Promise<UtilityScores['base']> => {
    const out = result.utility[field];
    if (!out) return null;
    const replies = await readReplies(run, run.resultPath, `utility.${field}`, out, targets.length);
    return Object.fromEntries(metrics.map((m) => [m, rowScores(m, replies, targets, boxes)]));
  };
  return { metrics, rows: targets.length, base: await phase('base_outputs'), final: await phase('final_outputs') };
}

type Stat = Pick<BootstrapOptions, 'seed' | 'resamples' | 'confidence'>;

/**
 * Each metric base → final over the pooled rows of `runs` (one run: that run's interval). `label`
 * names the intervals' random streams.
 */
export function metricSummaries(
  runs: readonly { run_id: string; scores: UtilityScores }[],
  label: string,
  stat: Stat,
): UtilityMetricSummary[] {
  const asked = new Set(runs.flatMap((r) => r.scores.metrics));
  return GENERATION_METRICS.filter((m) => asked.has(m)).map((metric) => {
    const of = (phase: 'base' | 'final'): UtilityInterval | null => {
      const samples: RunScores[] = runs.flatMap((r) => {
        const s = r.scores[phase]?.[metric];
        return s ? [{ run_id: r.run_id, scores: s }] : [];
      });
      return utilityInterval(metric, samples, { ...stat, label: `utility|${label}|${metric}|${phase}` });
    };
    const base = of('base');
    const final = of('final');
    return { metric, base, final, delta: base && final ? final.estimate - base.estimate : null };
  });
}

export const METRIC_WORDS: Record<UtilityMetric, string> = {
  loss: 'loss',
  accuracy: 'accuracy',
  exact_match: 'exact match',
  token_f1: 'token F1',
  point_in_box: 'point-in-box accuracy',
  parse_rate: 'parse rate',
};

function fixed(x: number, digits: number): string {
  const s = x.toFixed(digits);
  return /^-0\.?0*$/.test(s) ? s.slice(1) : s;
}

export function intervalText(u: UtilityInterval | null): string {
  return u ? `${fixed(u.estimate, 2)} [${fixed(u.lo, 2)}, ${fixed(u.hi, 2)}]` : '—';
}

export interface HeadlineRun {
  run_id: string;
  task: string;
  scores: UtilityScores | null;
  base_loss: number | null;
  final_loss: number | null;
}

function medianOrNull(values: (number | null)[]): number | null {
  const present = values.filter((v): v is number => v !== null && Number.isFinite(v));
  return present.length === 0 ? null : median(present);
}

/**
 * One headline per task: "task accuracy X → Y while focal exposure reached Z at dose D". Z is the
 * pooled median exposure of focal canaries after fine-tuning (hidden probes, or the first probe kind
 * present) at the highest canary dose of the visibility arm whose median there is highest; its
 * interval is the exposure table's for that group (crossed or nested, as there). X → Y is the task's generation metric (accuracy, else
 * exact match, else token F1; a loss-only task: the median utility loss) over the runs that hold
 * those canaries, base model → after fine-tuning.
 */
/**
 * The headline's exposure interval: the report's own figure for that group when the headline's
 * canaries are exactly one group's (so the headline and the exposure table print one interval),
 * else a bootstrap with the same design reading (`exposuresByRun`: crossed or nested).
 */
function headlineMedian(
  sample: readonly Observation[],
  groups: readonly GroupSummary[],
  stat: Stat,
  label: string,
): MedianInterval {
  const first = sample[0];
  const runs = new Set(sample.map((o) => o.run_id));
  const same = first
    ? groups.filter(
        (g) =>
          g.cohort === first.cohort &&
          g.dose === first.dose &&
          g.visibility === first.visibility &&
          g.probe_kind === first.probe_kind &&
          g.phase === first.phase &&
          g.inserted.n_obs === sample.length &&
          g.inserted.n_runs === runs.size,
      )
    : [];
  const only = same.length === 1 ? same[0]?.inserted.exposure : null;
  if (only) return only;
  return bootstrapMedian(exposuresByRun(sample), {
    ...stat,
    label,
    bounds: [0, first?.exposure_ceiling ?? Infinity],
  }) as MedianInterval;
}

export function utilityHeadlines(
  runs: readonly HeadlineRun[],
  observations: readonly Observation[],
  stat: Stat,
  groups: readonly GroupSummary[] = [],
): UtilityHeadline[] {
  const tasks = [...new Set(runs.map((r) => r.task))];
  return tasks.map((task) => {
    const mine = runs.filter((r) => r.task === task);
    const ids = new Set(mine.map((r) => r.run_id));
    const focal = observations.filter(
      (o) => o.role === 'focal' && o.phase === 'final' && o.dose !== null && ids.has(o.run_id),
    );
    const kind = PROBE_KIND_ORDER.find((k) => focal.some((o) => o.probe_kind === k));
    let best: { visibility: string | null; dose: number; sample: Observation[]; median: number } | null = null;
    for (const visibility of [...new Set(focal.map((o) => o.visibility))]) {
      const arm = focal.filter((o) => o.visibility === visibility && o.probe_kind === kind);
      if (arm.length === 0) continue;
      const dose = Math.max(...arm.map((o) => o.dose as number));
      const sample = arm.filter((o) => o.dose === dose);
      const m = median(sample.map((o) => o.exposure));
      if (!best || m > best.median) best = { visibility, dose, sample, median: m };
    }
    const behind = best ? mine.filter((r) => best.sample.some((o) => o.run_id === r.run_id)) : mine;
    const exposure =
      best && kind
        ? {
            visibility: best.visibility,
            dose: best.dose,
            probe_kind: kind,
            median: headlineMedian(best.sample, groups, stat, `utility-headline|${task}|exposure`),
            ceiling: best.sample[0]?.exposure_ceiling ?? 0,
            n_canaries: new Set(best.sample.map((o) => canaryKey(o))).size,
            n_runs: new Set(best.sample.map((o) => o.run_id)).size,
          }
        : null;
    const scored = behind.flatMap((r) => (r.scores ? [{ run_id: r.run_id, scores: r.scores }] : []));
    const asked = new Set(scored.flatMap((r) => r.scores.metrics));
    const metric: UtilityMetric = GENERATION_METRICS.find((m) => asked.has(m)) ?? 'loss';
    const summary =
      metric === 'loss'
        ? null
        : (metricSummaries(scored, `headline|${task}`, stat).find((s) => s.metric === metric) ?? null);
    const base_loss = medianOrNull(behind.map((r) => r.base_loss));
    const final_loss = medianOrNull(behind.map((r) => r.final_loss));
    const utilityPart =
      metric === 'loss'
        ? `utility loss ${base_loss === null ? '—' : fixed(base_loss, 4)} → ${final_loss === null ? '—' : fixed(final_loss, 4)} (median over runs)`
        : `task ${METRIC_WORDS[metric]} ${intervalText(summary?.base ?? null)} → ${intervalText(summary?.final ?? null)}`;
    const exposurePart = exposure
      ? ` while focal exposure reached ${fixed(exposure.median.estimate, 2)} [${fixed(exposure.median.lo, 2)}, ${fixed(exposure.median.hi, 2)}] (ceiling ${fixed(exposure.ceiling, 2)}) at dose ${exposure.dose} (visibility ${exposure.visibility ?? '—'}, ${exposure.probe_kind} probes, ${exposure.n_canaries} canar${exposure.n_canaries === 1 ? 'y' : 'ies'} · ${exposure.n_runs} run${exposure.n_runs === 1 ? '' : 's'}; utility over the same runs)`
      : ' (no focal canary was measured)';
    return {
      task,
      metric,
      runs: behind.map((r) => r.run_id),
      base: summary?.base ?? null,
      final: summary?.final ?? null,
      base_loss,
      final_loss,
      exposure,
      text: `${task}: ${utilityPart}${exposurePart}.`,
    };
  });
}
