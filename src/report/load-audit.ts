import { access } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { artifactError, quoteValue, UserInputError } from '../errors.js';
import { valueKey, type Axis } from '../metrics/cells.js';
import { canaryKey } from '../metrics/observation.js';
import { readAuditIndex, readSequentialRecord, type AuditIndex, type RunFailure } from '../contracts/index.js';
import type { Provenance } from '../provenance/index.js';
import { readJsonFile } from '../fs/index.js';
import { manifestInfo, type ManifestInfo } from './manifest-info.js';
import { auditIndexPath, FAILURE_FILE, manifestPathOf, outputDirOf, RESULT_FILE } from '../layout.js';

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

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * audit.json's axes in order, each with its labels; values a cell carries that the index does not
 * list (dose and placement are null in a no-canary run) follow in order of first appearance.
 */
function axesOf(listed: AuditIndex['axes'], cells: Record<string, unknown>[]): Axis[] {
  const axes: Axis[] = Object.entries(listed).map(([name, values]) => ({ name, values: [...values] }));
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
  const indexPath = auditIndexPath(dir);
  if (!(await exists(indexPath))) {
    throw new UserInputError(`no audit.json here; pass an audit folder (artifacts/audits/<audit-id>) or an audit id`, {
      location: { file: indexPath },
      code: 'E_NO_AUDIT',
    });
  }
  const index = await readAuditIndex(indexPath);
  // Sequential replicates: audit.json plans max seeds per cell; the audit is the runs the looks took.
  const sequential = await readSequentialRecord(dir);
  const taken = sequential ? new Set(sequential.taken) : null;
  const entries = index.runs
    .filter((entry) => !taken || taken.has(entry.run_id))
    .map((entry) => ({ ...entry, runDir: resolve(dir, entry.dir) }));

  const runs: LoadedRun[] = [];
  for (const e of entries) {
    const outputDir = outputDirOf(e.runDir);
    const manifestPath = manifestPathOf(e.runDir);
    const resultPath = join(outputDir, RESULT_FILE);
    const failurePath = join(outputDir, FAILURE_FILE);
    const hasResult = await exists(resultPath);
    // Inside the audit's folder: a manifest or failure.json linked out of it is refused, not read.
    const manifest = (await exists(manifestPath))
      ? manifestInfo(manifestPath, await readJsonFile(manifestPath, dir))
      : null;
    if (manifest && manifest.run_id !== e.run_id) {
      throw artifactError(
        manifestPath,
        'run_id',
        `is ${quoteValue(manifest.run_id)} but audit.json lists this folder as ${quoteValue(e.run_id)}`,
      );
    }
    if (hasResult && !manifest)
      throw artifactError(
        manifestPath,
        'manifest',
        'is missing beside a result.json: without it the scores cannot be interpreted',
      );
    let failure: RunFailure | null = null;
    if (!hasResult && (await exists(failurePath)))
      failure = parseFailure(failurePath, await readJsonFile(failurePath, dir));
    const status: RunStatus = hasResult ? 'finished' : failure ? 'failed' : 'missing';
    const reason =
      status === 'missing'
        ? manifest
          ? 'no result.json or failure.json yet (queued, running or lost)'
          : 'manifest.json not found'
        : null;
    runs.push({
      run_id: e.run_id,
      cell_id: e.cell_id,
      cell: e.cell,
      dir: e.runDir,
      status,
      reason,
      failure,
      manifest,
      resultPath,
      outputDir,
    });
  }
  markNoCanaryControls(runs);

  return {
    dir,
    id: index.id,
    name: index.name,
    grid_sha256: index.grid_sha256,
    axes: axesOf(
      index.axes,
      entries.map((e) => e.cell),
    ),
    runs,
    provenance: index.provenance,
  };
}

function parseFailure(path: string, raw: unknown): RunFailure {
  if (!isRecord(raw))
    throw artifactError(path, '(root)', 'must be a JSON object {run_id, kind, message, attempts, time}');
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
