import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { contentHash } from '../../../src/hash.js';
import { AUDIT_VERSION, type AuditIndex } from '../../../src/contracts/index.js';
import { controllerStamp, finishProvenance } from '../../../src/provenance/index.js';
import type { SubmitAuditInput } from '../../../src/queue/index.js';
import { resolveTuning, type QueueTuning } from '../../../src/queue/index.js';

/**
 * Small audits for queue tests: manifests the stand-in trainer (test/runner/stand_in_trainer.py)
 * understands, laid out as DESIGN's artifact tree. Knobs in task.params.stand_in make a run slow,
 * fail, or finish at once.
 */
export const STAND_IN_DIR = resolve(fileURLToPath(new URL('../../runner', import.meta.url)));

/** Environment that makes the local runner start the stand-in instead of trainer-py. */
export function standInEnv(): Record<string, string> {
  return { CANARY_AUDIT_TRAINER_PATH: STAND_IN_DIR, CANARY_AUDIT_TRAINER_MODULE: 'stand_in_trainer' };
}

export interface FixtureRun {
  updates: number;
  checkpointEvery?: number;
  knobs?: Record<string, unknown>;
  cell?: string;
  /** training.gpus: slots of one host the run takes at once. */
  gpus?: number;
}

export function tempDir(prefix: string): string {
  return mkdtempSync(join(tmpdir(), `canary-audit-${prefix}-`));
}

export function removeDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
}

/** audit.json lists every axis of a cell; stand-in runs differ by seed only. */
const STAND_IN_CELL = {
  visibility: 'visible',
  dose: 1,
  placement: 'spread',
  population: 'single',
  schedule: 'constant',
  model: 'stand-in',
  task: 'stand-in',
};

export function writeFixtureAudit(artifactsDir: string, name: string, runs: FixtureRun[]): SubmitAuditInput {
  const auditId = `audit-${contentHash({ name, runs }).slice(0, 12)}`;
  const auditDir = join(artifactsDir, 'audits', auditId);
  const out: SubmitAuditInput = { auditId, name, auditDir, runs: [] };
  runs.forEach((run, i) => {
    const cellId = run.cell ?? `cell=${i}`;
    const body = {
      schema_version: 'canary-audit.manifest/1',
      audit: { id: auditId, name, cell_id: cellId, cell: { i } },
      task: { name: 'stand-in', seed: i, params: { stand_in: run.knobs ?? {} } },
      training: {
        updates: run.updates,
        checkpoint_every: run.checkpointEvery ?? 5,
        batch_size: 2,
        ...(run.gpus !== undefined ? { gpus: run.gpus } : {}),
      },
    };
    const runId = `run-${contentHash(body).slice(0, 16)}`;
    const runDir = join(auditDir, 'runs', runId);
    mkdirSync(runDir, { recursive: true });
    const manifestPath = join(runDir, 'manifest.json');
    writeFileSync(manifestPath, `${JSON.stringify({ ...body, run_id: runId }, null, 2)}\n`);
    out.runs.push({ runId, cellId, manifestPath, ...(run.gpus !== undefined ? { gpus: run.gpus } : {}) });
  });
  const stamp = controllerStamp();
  const index: AuditIndex = {
    schema_version: AUDIT_VERSION,
    id: auditId,
    name,
    grid_file: join(auditDir, 'grid.yaml'),
    grid_sha256: contentHash({ name, runs }),
    created: new Date().toISOString(),
    axes: {},
    runs: out.runs.map((r, i) => ({
      run_id: r.runId,
      cell_id: r.cellId,
      cell: { ...STAND_IN_CELL, seed: i },
      dir: `runs/${r.runId}`,
    })),
    provenance: finishProvenance(stamp, stamp),
  };
  writeFileSync(join(auditDir, 'audit.json'), `${JSON.stringify(index, null, 2)}\n`);
  return out;
}

/** Queue timing for tests: locks expire in 2 s, stalled checks every second, quick retries. */
export function fastTuning(overrides: Partial<QueueTuning> = {}): QueueTuning {
  return resolveTuning(
    {
      lockMs: 2_000,
      stalledMs: 1_000,
      maxStalled: 3,
      attempts: 2,
      backoffMs: 200,
      stopGraceMs: 5_000,
      progressMs: 100,
      stepLogMs: 1_000,
      drainDelayS: 1,
      ...overrides,
    },
    {},
  );
}

/** Poll until `check` returns a value (not undefined/false), or fail after `timeoutMs`. */
export async function waitFor<T>(
  what: string,
  check: () => Promise<T | undefined | false> | T | undefined | false,
  timeoutMs = 30_000,
  everyMs = 100,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined && value !== false) return value;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? `: ${String(last)}` : ''}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
