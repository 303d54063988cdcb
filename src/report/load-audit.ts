import { access } from 'node:fs/promises';
import { isAbsolute, join, relative, resolve } from 'node:path';
import { UserInputError, quoteValue } from '../errors.js';
import { valueKey, type Axis } from '../metrics/cells.js';
import { canaryKey } from '../metrics/observation.js';
import type { RunFailure } from '../contracts/result.js';
import type { Provenance } from '../provenance/index.js';
import { readJsonFile } from './json-file.js';
import { manifestInfo, type ManifestInfo } from './manifest-info.js';

/**
 * An audit folder as stored on disk (audit.json + runs/<run_id>/...), read without touching any
 * score file: which runs finished, failed for good, or are missing, and each run's manifest facts.
 */
export type RunStatus = 'finished' | 'failed' | 'missing';

export interface LoadedRun {
  run_id: string;
  cell_id: string;
  cell: Record<string, unknown>;
  dir: string;
  status: RunStatus;
  /** Why a run is missing (or the note beside a failure). */
  reason: string | null;
  failure: RunFailure | null;
  manifest: ManifestInfo | null;
  resultPath: string;
  outputDir: string;
}

export interface LoadedAudit {
  dir: string;
  id: string;
  name: string;
  grid_sha256: string | null;
  axes: Axis[];
  runs: LoadedRun[];
  provenance: Provenance | null;
}

async function exists(path: string): Promise<boolean> {
  try {
    await access(path);
    return true;
  } catch {
    return false;
  }
}

function bad(file: string, field: string, message: string): UserInputError {
  return new UserInputError(message, { location: { file }, field, code: 'E_BAD_ARTIFACT' });
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** audit.json's `axes` as an ordered list; accepts {name: values}, [{name, values}] or [name]. */
function parseAxes(raw: unknown, cells: Record<string, unknown>[]): Axis[] {
  const axes: Axis[] = [];
  if (Array.isArray(raw)) {
    for (const item of raw) {
      if (typeof item === 'string') axes.push({ name: item, values: [] });
      else if (isRecord(item) && typeof item.name === 'string') axes.push({ name: item.name, values: Array.isArray(item.values) ? [...item.values] : [] });
    }
  } else if (isRecord(raw)) {
    for (const [name, values] of Object.entries(raw)) axes.push({ name, values: Array.isArray(values) ? [...values] : [] });
  }
  // Values (and axes) the index does not list are added in order of first appearance.
  for (const cell of cells) {
    for (const [name, value] of Object.entries(cell)) {
      let axis = axes.find((a) => a.name === name);
      if (!axis) axes.push((axis = { name, values: [] }));
      if (!axis.values.some((v) => valueKey(v) === valueKey(value))) axis.values.push(value);
    }
  }
  return axes;
}

export async function loadAudit(auditDir: string): Promise<LoadedAudit> {
  const dir = resolve(auditDir);
  const indexPath = join(dir, 'audit.json');
  if (!(await exists(indexPath))) {
    throw new UserInputError(`no audit.json here; pass an audit folder (artifacts/audits/<audit-id>) or an audit id`, {
      location: { file: indexPath },
      code: 'E_NO_AUDIT',
    });
  }
  const index = await readJsonFile(indexPath);
  if (!isRecord(index)) throw bad(indexPath, '(root)', 'must be a JSON object');
  if (typeof index.id !== 'string') throw bad(indexPath, 'id', `must be the audit id string, got ${quoteValue(index.id)}`);
  if (!Array.isArray(index.runs)) throw bad(indexPath, 'runs', `must be a list of runs, got ${quoteValue(index.runs)}`);

  const entries = index.runs.map((entry, i) => {
    if (!isRecord(entry) || typeof entry.run_id !== 'string') throw bad(indexPath, `runs[${i}].run_id`, `each run needs a run_id string, got ${quoteValue(entry)}`);
    const cell = isRecord(entry.cell) ? entry.cell : {};
    const rel = typeof entry.dir === 'string' ? entry.dir : join('runs', entry.run_id);
    const runDir = resolve(dir, rel);
    const inside = relative(dir, runDir);
    if (inside.startsWith('..') || isAbsolute(inside)) throw bad(indexPath, `runs[${i}].dir`, `${quoteValue(rel)} points outside the audit folder`);
    return { run_id: entry.run_id, cell_id: typeof entry.cell_id === 'string' ? entry.cell_id : entry.run_id, cell, runDir };
  });

  const runs: LoadedRun[] = [];
  for (const e of entries) {
    const outputDir = join(e.runDir, 'output');
    const manifestPath = join(e.runDir, 'manifest.json');
    const resultPath = join(outputDir, 'result.json');
    const failurePath = join(outputDir, 'failure.json');
    const hasResult = await exists(resultPath);
    const manifest = (await exists(manifestPath)) ? manifestInfo(manifestPath, await readJsonFile(manifestPath)) : null;
    if (manifest && manifest.run_id !== e.run_id) {
      throw bad(manifestPath, 'run_id', `is ${quoteValue(manifest.run_id)} but audit.json lists this folder as ${quoteValue(e.run_id)}`);
    }
    if (hasResult && !manifest) throw bad(manifestPath, 'manifest', 'is missing beside a result.json: without it the scores cannot be interpreted');
    let failure: RunFailure | null = null;
    if (!hasResult && (await exists(failurePath))) failure = parseFailure(failurePath, await readJsonFile(failurePath));
    const status: RunStatus = hasResult ? 'finished' : failure ? 'failed' : 'missing';
    const reason = status === 'missing' ? (manifest ? 'no result.json or failure.json yet (queued, running or lost)' : 'manifest.json not found') : null;
    runs.push({ run_id: e.run_id, cell_id: e.cell_id, cell: e.cell, dir: e.runDir, status, reason, failure, manifest, resultPath, outputDir });
  }
  markNoCanaryControls(runs);

  return {
    dir,
    id: index.id,
    name: typeof index.name === 'string' ? index.name : index.id,
    grid_sha256: typeof index.grid_sha256 === 'string' ? index.grid_sha256 : null,
    axes: parseAxes(index.axes, entries.map((e) => e.cell)),
    runs,
    provenance: isRecord(index.provenance) ? (index.provenance as unknown as Provenance) : null,
  };
}

function parseFailure(path: string, raw: unknown): RunFailure {
  if (!isRecord(raw)) throw bad(path, '(root)', 'must be a JSON object {run_id, kind, message, attempts, time}');
  return {
    run_id: String(raw.run_id ?? ''),
    kind: String(raw.kind ?? 'unknown'),
    message: String(raw.message ?? ''),
    attempts: typeof raw.attempts === 'number' ? raw.attempts : 0,
    time: String(raw.time ?? ''),
  };
}

/**
 * In a run that inserts nothing, a held-out canary whose id and code are a focal canary of another
 * run is that canary's no-canary control, not an ordinary held-out one.
 */
function markNoCanaryControls(runs: LoadedRun[]): void {
  const focal = new Set<string>();
  for (const run of runs) {
    for (const c of run.manifest?.canaries.values() ?? []) {
      if (c.role === 'focal') focal.add(canaryKey({ canary_id: c.id, code: c.code }));
    }
  }
  for (const run of runs) {
    if (!run.manifest?.no_canary) continue;
    for (const c of run.manifest.canaries.values()) {
      if (c.role === 'held_out' && focal.has(canaryKey({ canary_id: c.id, code: c.code }))) c.role = 'no_canary';
    }
  }
}
