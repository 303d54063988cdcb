import { basename, dirname, resolve } from 'node:path';
import { quoteValue, UserInputError } from '../errors.js';
import { canonicalJson } from '../hash.js';
import { REVERSE_SHIFT_DEFAULTS } from '../codes/index.js';
import { BUILTIN_MODELS, hfModelProblem, modelFromObject, modelLabel, modelProblem } from './models.js';
import { pretrainProblem } from './pretrain.js';
import { closest } from './suggest.js';
import { formatPath, type GridPath, type GridSource } from './source.js';
import type {
  AxisName,
  AxisValue,
  AxisValueTypes,
  CohortSpec,
  DesignValue,
  ModelValue,
  PlacementValue,
  PopulationValue,
  RawCohort,
  ScheduleValue,
  TaskValue,
  VisibilityValue,
  Window,
} from './types.js';

/**
 * Normalises one axis value as written (already schema-valid) into the value planning uses, with a
 * label for cell ids. Checks the schema cannot express (a window whose start is not before its
 * end, reverse-shift parameters on another scheme, an unknown model preset) fail here, naming
 * the place in the grid file.
 */
export const PLACEMENT_PRESETS: Readonly<Record<string, Window>> = {
  early: [0, 0.2],
  middle: [0.4, 0.6],
  late: [0.8, 1],
  uniform: [0, 1],
};

export interface AxisContext {
  source: GridSource;
  models: Readonly<Record<string, ModelValue>>;
}

type Normaliser<A extends AxisName> = (
  raw: unknown,
  path: GridPath,
  ctx: AxisContext,
) => { label: string; value: AxisValueTypes[A] };

function fail(ctx: AxisContext, path: GridPath, message: string): never {
  throw new UserInputError(message, {
    location: ctx.source.locate(path),
    field: formatPath(path),
    code: 'E_GRID_VALUE',
  });
}

function checkWindow(ctx: AxisContext, path: GridPath, w: Window): Window {
  if (!(w[0] < w[1])) fail(ctx, path, `window ${quoteValue(w)} is empty; write [from, to] with 0 <= from < to <= 1`);
  return [w[0], w[1]];
}

const fmt = (x: number): string => String(x);
const windowLabel = (w: Window): string => `${fmt(w[0])}-${fmt(w[1])}`;

const visibility: Normaliser<'visibility'> = (raw, path, ctx) => {
  if (typeof raw === 'string') return { label: raw, value: { scheme: raw } };
  const o = raw as { kind: string; width?: number; shift?: number; name?: string };
  if (o.kind !== 'encoded:reverse-shift' && (o.width !== undefined || o.shift !== undefined)) {
    fail(ctx, path, `width and shift apply only to encoded:reverse-shift, not ${JSON.stringify(o.kind)}; remove them`);
  }
  const value: VisibilityValue = { scheme: o.kind };
  if (o.kind === 'encoded:reverse-shift') {
    value.width = o.width ?? REVERSE_SHIFT_DEFAULTS.width;
    value.shift = o.shift ?? REVERSE_SHIFT_DEFAULTS.shift;
  }
  const isDefault =
    o.kind !== 'encoded:reverse-shift' ||
    (value.width === REVERSE_SHIFT_DEFAULTS.width && value.shift === REVERSE_SHIFT_DEFAULTS.shift);
  const label = o.name ?? (isDefault ? o.kind : `${o.kind}(w${value.width},s${value.shift})`);
  return { label, value: o.kind === 'encoded:reverse-shift' ? value : { scheme: o.kind } };
};

const dose: Normaliser<'dose'> = (raw) => ({ label: String(raw), value: raw as number });
const seed: Normaliser<'seed'> = (raw) => ({ label: String(raw), value: raw as number });

const placement: Normaliser<'placement'> = (raw, path, ctx) => {
  if (typeof raw === 'string')
    return { label: raw, value: { window: PLACEMENT_PRESETS[raw] as Window, spacing: null, final: null } };
  if (Array.isArray(raw)) {
    const w = checkWindow(ctx, path, raw as Window);
    return { label: windowLabel(w), value: { window: w, spacing: null, final: null } };
  }
  const o = raw as { window?: string | Window; spacing?: number; final?: Window; name?: string };
  const w =
    o.window === undefined
      ? (PLACEMENT_PRESETS.uniform as Window)
      : typeof o.window === 'string'
        ? (PLACEMENT_PRESETS[o.window] as Window)
        : checkWindow(ctx, [...path, 'window'], o.window);
  const final = o.final === undefined ? null : checkWindow(ctx, [...path, 'final'], o.final);
  const value: PlacementValue = { window: [w[0], w[1]], spacing: o.spacing ?? null, final };
  let label = typeof o.window === 'string' ? o.window : windowLabel(w);
  if (value.spacing !== null) label += `+gap${value.spacing}`;
  if (final) label += `+final${windowLabel(final)}`;
  return { label: o.name ?? label, value };
};

function cohort(raw: RawCohort, index: number, path: GridPath, ctx: AxisContext): CohortSpec {
  const order = raw.order ?? 'with';
  const window = raw.window === undefined ? null : checkWindow(ctx, [...path, 'window'], raw.window);
  return {
    name: raw.name ?? `aux${index}`,
    dose: raw.dose,
    count: raw.count,
    order,
    window,
    spacing: raw.spacing ?? null,
  };
}

const population: Normaliser<'population'> = (raw, path, ctx) => {
  if (typeof raw === 'string') return { label: raw, value: { kind: raw as PopulationValue['kind'] } };
  const o = raw as {
    kind: 'mixed-dose' | 'cohorts';
    doses?: number[];
    count?: number;
    cohorts?: RawCohort[];
    name?: string;
  };
  if (o.kind === 'mixed-dose') {
    const doses = o.doses ? [...new Set(o.doses)].sort((a, b) => a - b) : undefined;
    if (o.doses && doses && doses.length !== o.doses.length)
      fail(ctx, [...path, 'doses'], `${quoteValue(o.doses)} lists a dose twice; list each once`);
    const value: PopulationValue = {
      kind: 'mixed-dose',
      ...(doses ? { doses } : {}),
      ...(o.count !== undefined ? { count: o.count } : {}),
    };
    const label =
      o.name ?? `mixed-dose(${doses ? doses.join('+') : 'axis'}${o.count !== undefined ? `x${o.count}` : ''})`;
    return { label, value };
  }
  const cohorts = (o.cohorts ?? []).map((c, i) => cohort(c, i, [...path, 'cohorts', i], ctx));
  const names = new Set<string>();
  cohorts.forEach((c, i) => {
    if (names.has(c.name))
      fail(
        ctx,
        [...path, 'cohorts', i],
        `cohort name ${JSON.stringify(c.name)} is used twice; give each cohort its own name`,
      );
    names.add(c.name);
  });
  const label = o.name ?? `cohorts(${cohorts.map((c) => `d${c.dose}x${c.count}-${c.order}`).join('+')})`;
  return { label, value: { kind: 'cohorts', cohorts } };
};

const schedule: Normaliser<'schedule'> = (raw) => {
  if (typeof raw === 'string')
    return { label: raw, value: { kind: raw as ScheduleValue['kind'], warmup_updates: 0, min_lr_ratio: 0 } };
  const o = raw as { kind: ScheduleValue['kind']; warmup_updates?: number; min_lr_ratio?: number; name?: string };
  const value: ScheduleValue = {
    kind: o.kind,
    warmup_updates: o.warmup_updates ?? 0,
    min_lr_ratio: o.min_lr_ratio ?? 0,
  };
  let label: string = o.kind;
  const extras: string[] = [];
  if (value.warmup_updates > 0) extras.push(`warmup${value.warmup_updates}`);
  if (value.min_lr_ratio > 0) extras.push(`min${fmt(value.min_lr_ratio)}`);
  if (extras.length > 0) label += `(${extras.join(',')})`;
  return { label: o.name ?? label, value };
};

const model: Normaliser<'model'> = (raw, path, ctx) => {
  if (typeof raw === 'string') {
    const preset = ctx.models[raw] ?? BUILTIN_MODELS[raw];
    if (!preset) {
      const known = [...new Set([...Object.keys(ctx.models), ...Object.keys(BUILTIN_MODELS)])];
      const hint = closest(raw, known);
      fail(
        ctx,
        path,
        `unknown model preset ${JSON.stringify(raw)}${hint ? ` (did you mean ${JSON.stringify(hint)}?)` : ''}; use one of ${known.join(', ')}, or define it under models:`,
      );
    }
    return { label: raw, value: structuredClone(preset) };
  }
  const o = raw as Record<string, unknown>;
  const gridDir = dirname(resolve(ctx.source.file));
  const wrong = modelProblem(o, gridDir);
  if (wrong) fail(ctx, [...path, ...wrong.path], wrong.message);
  const value = modelFromObject(o, gridDir);
  const problem = pretrainProblem(value.pretrain);
  if (problem) fail(ctx, [...path, 'pretrain', ...problem.path], problem.message);
  const hfProblem = hfModelProblem(value);
  if (hfProblem) fail(ctx, [...path, ...hfProblem.path], hfProblem.message);
  return { label: (o.label as string | undefined) ?? modelLabel(value), value };
};

const task: Normaliser<'task'> = (raw, path, ctx) => {
  const o = (typeof raw === 'string' ? { name: raw } : raw) as { name: string; label?: string } & Record<
    string,
    unknown
  >;
  const { name, label, ...rest } = o;
  if (name === 'synthetic-email') {
    const value: TaskValue = { name, params: { style: (rest.style as string | undefined) ?? 'compact' } };
    return { label: label ?? `${name}/${value.params.style as string}`, value };
  }
  if (name === 'gui-grounding') {
    // Synthetic screenshots: the parameters as written (the task fills its defaults).
    const size =
      rest.width !== undefined || rest.height !== undefined
        ? `/${String(rest.width ?? '')}x${String(rest.height ?? '')}`
        : '';
    const style = rest.style !== undefined ? `/${String(rest.style)}` : '';
    const params = structuredClone(rest);
    resolveUtilityPath(params, path, ctx);
    return { label: label ?? `${name}${size}${style}`, value: { name, params } };
  }
  // Dataset-backed tasks: the parameters as written (the task fills its preset's defaults), with a
  // local source resolved against the grid file's folder, as a local model's path is.
  const params = structuredClone(rest);
  const source = params.source as { path?: string; repo?: string; revision?: string; config?: string } | undefined;
  if (source) {
    const at = [...path, 'source'];
    if (source.repo === undefined && source.path === undefined)
      fail(
        ctx,
        at,
        'a dataset source needs repo: org/name (a Hub dataset) or path: ./file-or-folder (on this machine)',
      );
    if (source.repo !== undefined && source.path !== undefined)
      fail(ctx, [...at, 'path'], 'give repo (a Hub dataset) or path (a local file or folder), not both');
    const hubOnly =
      source.path !== undefined ? (['revision', 'config'] as const).find((k) => source[k] !== undefined) : undefined;
    if (hubOnly) fail(ctx, [...at, hubOnly], `a local dataset (path:) has no Hub ${hubOnly}; remove ${hubOnly}`);
  }
  if (source?.path !== undefined) source.path = resolve(dirname(resolve(ctx.source.file)), source.path);
  resolveUtilityPath(params, path, ctx);
  const where = source?.repo ?? (source?.path !== undefined ? basename(source.path) : undefined);
  return {
    label: label ?? (name === 'dataset' || where === undefined ? `${name}${where ? `/${where}` : ''}` : name),
    value: { name, params },
  };
};

/** A task's utility source (`utility: {source: {path}}`), resolved against the grid file's folder like the task's own. */
function resolveUtilityPath(params: Record<string, unknown>, path: GridPath, ctx: AxisContext): void {
  const source = (params.utility as { source?: { path?: string; repo?: string } } | undefined)?.source;
  if (!source) return;
  if (source.repo !== undefined && source.path !== undefined)
    fail(
      ctx,
      [...path, 'utility', 'source', 'path'],
      'give repo (a Hub dataset) or path (a local file or folder), not both',
    );
  if (source.path !== undefined) source.path = resolve(dirname(resolve(ctx.source.file)), source.path);
}

export const RARE_TOKEN_DEFAULTS = { length: 4, pool: 16, decoys: 9999 } as const;

/** sampled-text: 8 tokens at the base model's own temperature, 999 decoys (1,000 candidates). */
export const SAMPLED_TEXT_DEFAULTS = { length: 8, temperature: 1, decoys: 999 } as const;

/** The most decoys a sampled-text canary may ask the trainer to sample. */
export const SAMPLED_TEXT_MAX_DECOYS = 100_000;

const design: Normaliser<'design'> = (raw, path, ctx) => {
  const o = (typeof raw === 'string' ? { kind: raw } : raw) as {
    kind: DesignValue['kind'];
    length?: number;
    pool?: number;
    decoys?: number;
    temperature?: number;
    name?: string;
  };
  if (o.kind === 'codes') return { label: o.name ?? 'codes', value: { kind: 'codes' } };
  if (o.kind === 'sampled-text') return sampledTextDesign(o, path, ctx);
  if (o.temperature !== undefined)
    fail(
      ctx,
      [...path, 'temperature'],
      `temperature ${o.temperature} applies to design sampled-text only (rare-tokens draws tokens uniformly); remove it, or write kind: sampled-text`,
    );
  const value: DesignValue = {
    kind: 'rare-tokens',
    length: o.length ?? RARE_TOKEN_DEFAULTS.length,
    pool: o.pool ?? RARE_TOKEN_DEFAULTS.pool,
    decoys: o.decoys ?? RARE_TOKEN_DEFAULTS.decoys,
  };
  const isDefault =
    value.length === RARE_TOKEN_DEFAULTS.length &&
    value.pool === RARE_TOKEN_DEFAULTS.pool &&
    value.decoys === RARE_TOKEN_DEFAULTS.decoys;
  return {
    label: o.name ?? (isDefault ? 'rare-tokens' : `rare-tokens(l${value.length},p${value.pool},d${value.decoys})`),
    value,
  };
};

function sampledTextDesign(
  o: { length?: number; pool?: number; decoys?: number; temperature?: number; name?: string },
  path: GridPath,
  ctx: AxisContext,
): { label: string; value: DesignValue } {
  if (o.pool !== undefined)
    fail(
      ctx,
      [...path, 'pool'],
      `pool ${o.pool} applies to design rare-tokens only: sampled-text draws its tokens from the base model's whole distribution; remove pool, or set temperature to sharpen (below 1) or flatten (above 1) that distribution`,
    );
  if (o.decoys !== undefined && o.decoys > SAMPLED_TEXT_MAX_DECOYS)
    fail(
      ctx,
      [...path, 'decoys'],
      `decoys ${o.decoys} would have the trainer sample ${o.decoys} texts per canary before training; use at most ${SAMPLED_TEXT_MAX_DECOYS} (extrapolated exposure reaches beyond the sampled candidates)`,
    );
  const d = SAMPLED_TEXT_DEFAULTS;
  const value = {
    kind: 'sampled-text' as const,
    length: o.length ?? d.length,
    temperature: o.temperature ?? d.temperature,
    decoys: o.decoys ?? d.decoys,
  };
  const isDefault = value.length === d.length && value.temperature === d.temperature && value.decoys === d.decoys;
  return {
    label:
      o.name ?? (isDefault ? 'sampled-text' : `sampled-text(l${value.length},t${value.temperature},d${value.decoys})`),
    value,
  };
}

const NORMALISERS: { [A in AxisName]: Normaliser<A> } = {
  visibility,
  dose,
  placement,
  population,
  schedule,
  model,
  task,
  design,
  seed,
};

/** Normalise one value of axis `axis` written at `path`. */
export function normaliseAxisValue<A extends AxisName>(
  axis: A,
  raw: unknown,
  path: GridPath,
  ctx: AxisContext,
): AxisValue<AxisValueTypes[A]> {
  const { label, value } = (NORMALISERS[axis] as Normaliser<A>)(raw, path, ctx);
  return { label, key: canonicalJson(value), value, path };
}

/** Values of axes a grid leaves out. */
export const AXIS_DEFAULTS: { [A in Exclude<AxisName, 'visibility' | 'dose'>]: unknown } = {
  placement: 'uniform',
  population: 'single-dose',
  schedule: 'constant',
  model: 'tiny',
  task: 'synthetic-email',
  design: 'codes',
  seed: 0,
};
