import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  collectStatus,
  queueConnection,
  startEmbeddedRedis,
  submitAudit,
  type QueueConnection,
} from '../../../src/queue/index.js';
import { WorkerPool } from '../../../src/worker/index.js';
import { localRunner } from '../../../src/runner/index.js';
import { sleep } from '../../../src/sleep.js';
import { STAND_IN_DIR, fastTuning, waitFor, writeFixtureAudit } from './fixtures.js';

/**
 * The Redis-outage drill: two workers (one slot each) train stand-in runs; Redis stops while they
 * train and comes back `outageMs` later on the same port and append-only file. Then every run must
 * finish (none lost), no update may be trained by two trainers (each attempt of the stand-in
 * records the updates it trained in output/.trained), and every result must equal an undisturbed run.
 */
export interface OutageDrillOptions {
  dir: string;
  lockMs: number;
  outageMs: number;
  runs: number;
  updates: number;
  stepS: number;
  /** Progress (updates) the first run must reach before Redis stops. */
  stopAt: number;
  /**
   * `redis` (default): Redis stops for `outageMs`. `event-loop`: Redis stays up and the workers'
   * process blocks its event loop for `outageMs` (a machine so loaded that no timer fires), so no
   * lock is renewed while the trainers go on.
   */
  disturb?: 'redis' | 'event-loop';
}

export interface OutageDrillReport {
  runs: number;
  lost: number;
  trainedTwice: number;
  identical: number;
  attemptsSpent: number;
  failures: string[];
}

export async function runOutageDrill(o: OutageDrillOptions): Promise<OutageDrillReport> {
  let server = await startEmbeddedRedis({ dir: join(o.dir, 'redis') });
  const conn = queueConnection(server, 'outage');
  const artifacts = join(o.dir, 'artifacts');
  const knobs = { step_s: o.stepS };
  const audit = writeFixtureAudit(
    artifacts,
    'outage',
    Array.from({ length: o.runs }, (_, i) => ({ updates: o.updates + i, checkpointEvery: 10, knobs })),
  );
  const tuning = fastTuning({ lockMs: o.lockMs, stalledMs: Math.max(500, o.lockMs / 2), stopGraceMs: 10_000 });
  await submitAudit(conn, artifacts, audit, tuning);
  const runner = localRunner({ trainerPath: STAND_IN_DIR, module: 'stand_in_trainer' });
  const pools = await Promise.all(
    ['drill-a', 'drill-b'].map((host) =>
      WorkerPool.start({ conn, artifactsDir: artifacts, runner, slots: [{ gpu: null, threads: 1 }], tuning, host }),
    ),
  );
  try {
    await waitForProgress(conn, audit.auditId, o.stopAt);
    if (o.disturb === 'event-loop') {
      const until = Date.now() + o.outageMs;
      while (Date.now() < until) {
        // Busy: no timer, no socket, no lock renewal runs in this process meanwhile.
      }
    } else {
      await server.stop();
      await sleep(o.outageMs);
      server = await startEmbeddedRedis({ dir: join(o.dir, 'redis'), port: server.port });
    }
    const status = await waitFor(
      'the audit to finish',
      async () => {
        const [s] = await collectStatus(conn, audit.auditId);
        return s?.state === 'finished' ? s : undefined;
      },
      300_000,
      250,
    );
    const report: OutageDrillReport = {
      runs: o.runs,
      lost: 0,
      trainedTwice: 0,
      identical: 0,
      attemptsSpent: 0,
      failures: [],
    };
    for (const run of audit.runs) {
      const out = join(run.manifestPath, '..', 'output');
      const state = status.runs.find((r) => r.run_id === run.runId);
      if (state?.state !== 'completed') {
        report.lost += 1;
        report.failures.push(`${run.runId}: ${state?.state} ${state?.failure ?? ''}`);
      }
      report.attemptsSpent += Math.max(0, (state?.attempts_made ?? 1) - 1);
      if (trainedTwice(join(out, '.trained'))) report.trainedTwice += 1;
      if (
        existsSync(join(out, 'result.json')) &&
        resultAcc(out) === referenceAcc(run.manifestPath, join(o.dir, 'reference', run.runId))
      )
        report.identical += 1;
    }
    return report;
  } finally {
    await Promise.all(pools.map((p) => p.shutdown()));
    await server.stop();
  }
}

async function waitForProgress(conn: QueueConnection, auditId: string, update: number): Promise<void> {
  await waitFor(
    `a run to pass update ${update}`,
    async () => {
      const [s] = await collectStatus(conn, auditId);
      return s?.runs.some((r) => r.state === 'active' && (r.progress?.update ?? 0) >= update);
    },
    120_000,
    100,
  );
}

/** True when two attempts trained an overlapping range of updates (lines "pid first last how"). */
export function trainedTwice(path: string): boolean {
  if (!existsSync(path)) return false;
  const ranges = readFileSync(path, 'utf8')
    .trim()
    .split('\n')
    .map((line) => line.split(' ').slice(1, 3).map(Number) as [number, number])
    .sort((a, b) => a[0] - b[0]);
  return ranges.some((r, i) => i > 0 && r[0] < ranges[i - 1]![1]);
}

function resultAcc(out: string): string {
  return (JSON.parse(readFileSync(join(out, 'result.json'), 'utf8')) as { stand_in: { acc: string } }).stand_in.acc;
}

function referenceAcc(manifestPath: string, outDir: string): string {
  execFileSync('/usr/bin/python3', ['-m', 'stand_in_trainer', 'run', '--manifest', manifestPath, '--out', outDir], {
    env: { ...process.env, PYTHONPATH: STAND_IN_DIR, STAND_IN_STEP_S: '0' },
    stdio: 'ignore',
  });
  return resultAcc(outDir);
}
