import { describe, expect, it } from 'vitest';
import { auditView, phaseLabel, runView } from '../../src/dashboard/source.js';
import type { AuditStatus, RunProgress, RunStatus } from '../../src/queue/index.js';

/** The dashboard's run rows from a status snapshot: pure, no Redis, no browser. */
const progress = (over: Partial<RunProgress>): RunProgress => ({
  phase: 'training',
  host: 'h',
  gpu: null,
  worker_pid: 1,
  trainer_pid: 2,
  attempt: 1,
  device: 'cpu',
  update: 0,
  total: 192,
  loss: null,
  rows_per_s: null,
  eta_s: null,
  resumed_from: null,
  last_checkpoint: null,
  eval: null,
  updated: 0,
  ...over,
});
const run = (id: string, over: Partial<RunStatus>): RunStatus => ({
  run_id: id,
  cell_id: `dose=1,seed=${id.slice(-1)}`,
  state: 'active',
  attempts_made: 0,
  max_attempts: 2,
  progress: null,
  failure: null,
  result: null,
  started: null,
  finished: null,
  ...over,
});

describe('dashboard run rows', () => {
  it('show a run waiting for its base by the phase "waiting for base, built by run X" and the base ETA, not "train 0/192 ETA -"', () => {
    const builder = run('run-aaaaaaaaaaaaaaa0', {
      progress: progress({ phase: 'pretraining', update: 40, total: 200, eta_s: 80 }),
    });
    const waiting = run('run-bbbbbbbbbbbbbbb1', {
      progress: progress({
        phase: 'waiting_base',
        waiting: { on: 'base_model', run_id: 'run-aaaaaaaaaaaaaaa0', pid: 4321, since: 0 },
      }),
    });
    expect(phaseLabel(waiting)).toBe('waiting for base, built by run run-aaaaaaaaaaaaaaa0 (pid 4321)');
    expect(phaseLabel(builder)).toBe('pretrain');
    expect(runView(waiting, [], [builder, waiting])).toMatchObject({
      phase: 'waiting for base, built by run run-aaaaaaaaaaaaaaa0 (pid 4321)',
      eta_s: 80,
    });
    // Without the builder in view the base's ETA is unknown, never the waiting run's own "-" as if training.
    expect(runView(waiting, [])).toMatchObject({ eta_s: null });
    const audit: AuditStatus = {
      audit_id: 'audit-1',
      name: 'q',
      state: 'running',
      submitted: '',
      cancelled_at: null,
      counts: { active: 2 },
      runs: [builder, waiting],
      summary: null,
    };
    expect(auditView(audit, new Map()).runs.map((r) => [r.phase, r.eta_s])).toEqual([
      ['pretrain', 80],
      ['waiting for base, built by run run-aaaaaaaaaaaaaaa0 (pid 4321)', 80],
    ]);
  });
});
