import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { auditEta, estimateAudit, type AuditStatus, type RunProgress, type RunStatus } from '../../src/queue/index.js';
import { runDetail } from '../../src/cli/views/index.js';

const NOW = Date.UTC(2026, 0, 1, 1, 0, 0);
const at = (s: number) => new Date(NOW + s * 1000).toISOString();
const progress = (over: Partial<RunProgress>): RunProgress => ({
  phase: 'training',
  host: 'h',
  gpu: null,
  worker_pid: 1,
  trainer_pid: 2,
  attempt: 1,
  device: 'cpu',
  update: 10,
  total: 100,
  loss: 1,
  rows_per_s: 5,
  eta_s: null,
  resumed_from: null,
  last_checkpoint: null,
  eval: null,
  updated: NOW,
  ...over,
});
let n = 0;
const run = (over: Partial<RunStatus>): RunStatus => ({
  run_id: `run-${(n += 1)}`,
  cell_id: 'dose=1',
  state: 'waiting',
  attempts_made: 0,
  max_attempts: 3,
  progress: null,
  failure: null,
  result: null,
  started: null,
  finished: null,
  ...over,
});
const audit = (runs: RunStatus[], state: AuditStatus['state'] = 'running'): AuditStatus => ({
  audit_id: 'a',
  name: 'n',
  state,
  submitted: '',
  cancelled_at: null,
  counts: {},
  runs,
  summary: null,
});

describe('audit ETA', () => {
  it('gives queued runs to the first slot that frees up, after the active runs', () => {
    const finished = run({ state: 'completed', started: at(-200), finished: at(-100) }); // 100 s of own work
    const active = run({ state: 'active', progress: progress({ eta_s: 50, phase_s: { training: 50 } }) });
    // Slots free at 0 and 50 s; two queued runs of 100 s each end at 100 and 150 s.
    expect(auditEta(audit([finished, active, run({}), run({})]), NOW, 2)).toBe(150);
    // Without the slot count, the active runs are the workers: 50 + 100 + 100.
    expect(auditEta(audit([finished, active, run({}), run({})]), NOW)).toBe(250);
    // The longest active run bounds it from below.
    expect(auditEta(audit([finished, run({ state: 'active', progress: progress({ eta_s: 500 }) })]), NOW, 4)).toBe(500);
    // An active run needs at least the typical run's own work less what it has done (its final evaluation is still to come).
    expect(
      estimateAudit(
        audit([
          finished,
          run({ run_id: 'x', state: 'active', progress: progress({ eta_s: 5, phase_s: { training: 60 } }) }),
        ]),
        NOW,
      ).runs.get('x'),
    ).toBe(40);
    // The tracker's ETA is as of its last write.
    expect(
      auditEta(
        audit([
          run({ state: 'active', progress: progress({ eta_s: 50, updated: NOW - 20_000, phase_s: { training: 10 } }) }),
        ]),
        NOW,
      ),
    ).toBe(30);
  });

  it('does not charge a shared base to every run: waiting for it and building it are counted apart', () => {
    // The finished run built seed 0's base: 160 s of wall time, 60 s of it its own work.
    const finished = run({
      state: 'completed',
      started: at(-300),
      finished: at(-140),
      progress: progress({
        phase: 'finishing',
        phase_s: { starting: 5, pretraining: 100, training: 40, evaluating: 15 },
      }),
    });
    const builder = run({
      run_id: 'builder',
      state: 'active',
      progress: progress({ phase: 'pretraining', eta_s: 30, phase_s: { starting: 5, pretraining: 20 } }),
    });
    const waiter = run({
      run_id: 'waiter',
      state: 'active',
      progress: progress({
        phase: 'waiting_base',
        update: 0,
        eta_s: null,
        waiting: { on: 'base_model', run_id: 'builder', pid: 9, since: NOW - 20_000 },
        phase_s: { starting: 5, waiting_base: 20 },
      }),
    });
    const estimate = estimateAudit(audit([finished, builder, waiter, run({}), run({}), run({})]), NOW, 2);
    expect(estimate).toMatchObject({ own_s: 60, own_from: 'finished' });
    // Both active runs: 30 s of base, then 60 s of their own.
    expect([estimate.runs.get('builder'), estimate.runs.get('waiter')]).toEqual([90, 90]);
    // Queued runs: 60 s of their own, plus a base build (60 s on average) in 1 of the 2 started runs
    // beyond the first (whose base the audit shares): 90 s each, on the slots freed at 90 s.
    expect(estimate.eta_s).toBe(90 + 90 + 90);
    // One base for the whole audit (the others waited for it or loaded it): queued runs pay nothing for it.
    expect(estimateAudit(audit([finished, waiter, run({}), run({})]), NOW, 2).eta_s).toBe(60 + 60);
    // The builder out of view (another audit): its base is taken as ready, the waiter's own work remains.
    expect(estimateAudit(audit([finished, waiter]), NOW).runs.get('waiter')).toBe(60);
  });

  it('says nothing until a fine-tuning rate or a finished run is measured, and 0 once all is done', () => {
    const builder = run({ state: 'active', progress: progress({ phase: 'pretraining', eta_s: 30 }) });
    const waiter = run({
      state: 'active',
      progress: progress({
        phase: 'waiting_base',
        eta_s: null,
        waiting: { on: 'base_model', run_id: builder.run_id, pid: 9, since: NOW },
      }),
    });
    expect(auditEta(audit([builder, waiter, run({}), run({})]), NOW, 2)).toBeNull();
    expect(auditEta(audit([run({}), run({})]), NOW)).toBeNull();
    // A run fine-tuning: own work = so far + training left + the longest evaluation measured (the base one).
    const tuning = run({
      state: 'active',
      progress: progress({ eta_s: 40, phase_s: { starting: 5, training: 10, evaluating: 15 } }),
    });
    expect(estimateAudit(audit([tuning, run({})]), NOW, 1)).toMatchObject({
      own_s: 30 + 40 + 15,
      own_from: 'active',
      eta_s: 55 + 85,
    });
    expect(auditEta(audit([run({ state: 'completed', started: at(-10), finished: at(0) })], 'finished'), NOW)).toBe(0);
  });
});

/**
 * A recorded audit: `status --watch --json` every 2 s over `canary-audit run` of the quickstart grid
 * with one seed (6 runs, 2 CPU workers, load average 12-17 on 2 cores), compacted to one snapshot
 * every 10 s and the fields the ETA reads. Run 1 pretrained the base for 254 s while run 2 waited
 * for it; the audit took 700 s.
 */
interface Recording {
  slots: number;
  end: string;
  snapshots: {
    time: string;
    state: AuditStatus['state'];
    runs: (Omit<RunStatus, 'progress' | 'attempts_made' | 'max_attempts' | 'failure' | 'result'> & {
      progress: Partial<RunProgress> | null;
    })[];
  }[];
}
const recording = JSON.parse(
  readFileSync(join(import.meta.dirname, 'fixtures', 'eta-quickstart-6runs.json'), 'utf8'),
) as Recording;
const replay = recording.snapshots.map((s) => {
  const runs = s.runs.map(
    (r): RunStatus => ({
      ...r,
      attempts_made: 0,
      max_attempts: 3,
      failure: null,
      result: null,
      progress: r.progress ? progress(r.progress) : null,
    }),
  );
  const now = Date.parse(s.time);
  return { now, left: (Date.parse(recording.end) - now) / 1000, audit: audit(runs, s.state) };
});

describe('audit ETA on a recorded audit', () => {
  it('names no figure while the base pretrains and no fine-tuning rate is known', () => {
    const building = replay.filter((r) => r.audit.runs.some((x) => x.progress?.phase === 'pretraining'));
    expect(building.length).toBeGreaterThan(15);
    for (const r of building) expect(auditEta(r.audit, r.now, recording.slots)).toBeNull();
    // Meanwhile the waiting run says whose base it waits for, and how long that base has left.
    const r = building[5] as (typeof building)[number];
    const waiter = r.audit.runs.find((x) => x.progress?.phase === 'waiting_base') as RunStatus;
    const builder = r.audit.runs.find((x) => x.progress?.phase === 'pretraining') as RunStatus;
    expect(runDetail(waiter, r.now, r.audit.runs)).toMatch(
      new RegExp(
        `^waiting for base, built by run ${builder.run_id} \\(pid \\d+\\) {2}waited \\S+ {2}base ETA \\d+m\\d+s`,
      ),
    );
  });

  it('is within 25% of the time the audit really took from then on, wherever a minute or more was left', () => {
    const known = replay.filter((r) => auditEta(r.audit, r.now, recording.slots) !== null);
    expect(known.length).toBeGreaterThan(30);
    for (const r of known.filter((x) => x.left >= 60)) {
      const eta = auditEta(r.audit, r.now, recording.slots) as number;
      expect(
        Math.abs(eta - r.left) / r.left,
        `at ${((r.now - (replay[0] as (typeof replay)[number]).now) / 1000).toFixed(0)} s: ETA ${eta.toFixed(0)} s, ${r.left.toFixed(0)} s left`,
      ).toBeLessThanOrEqual(0.25);
    }
    expect(
      auditEta(
        (replay[replay.length - 1] as (typeof replay)[number]).audit,
        Date.parse(recording.end),
        recording.slots,
      ),
    ).toBeLessThan(5);
  });
});
