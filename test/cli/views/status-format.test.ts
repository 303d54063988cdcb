import { describe, expect, it } from 'vitest';
import { versioned } from '../../../src/cli/json-output.js';
import { expectOutput } from '../../helpers/output-schema.js';
import type { RunProgress } from '../../../src/queue/job-data.js';
import {
  formatDuration,
  progressBar,
  renderBars,
  renderChanges,
  renderPlain,
  runDetail,
} from '../../../src/cli/views/status-format.js';
import type { AuditStatus, RunStatus } from '../../../src/queue/status.js';

const progress = (over: Partial<RunProgress> = {}): RunProgress => ({
  phase: 'training',
  host: 'node7',
  gpu: '3',
  worker_pid: 1,
  trainer_pid: 2,
  attempt: 1,
  device: 'cuda:0',
  update: 120,
  total: 400,
  loss: 1.23456,
  rows_per_s: 52.14,
  eta_s: 192,
  resumed_from: null,
  last_checkpoint: 100,
  eval: null,
  updated: 0,
  ...over,
});
const run = (over: Partial<RunStatus>): RunStatus => ({
  run_id: 'run-0123456789abcdef',
  cell_id: 'dose=8,seed=0',
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
const audit = (runs: RunStatus[], over: Partial<AuditStatus> = {}): AuditStatus => {
  const counts: AuditStatus['counts'] = {};
  for (const r of runs) counts[r.state] = (counts[r.state] ?? 0) + 1;
  return {
    audit_id: 'audit-abcdefabcdef',
    name: 'email',
    state: 'running',
    submitted: '',
    cancelled_at: null,
    counts,
    runs,
    summary: null,
    ...over,
  };
};

describe('status formatting', () => {
  it('formats durations and bars', () => {
    expect([null, 5, 192, 3_900, 200_000].map(formatDuration)).toEqual(['-', '5s', '3m12s', '1h05m', '2d07h']);
    expect(progressBar(0.5, 10)).toBe('[#####-----]');
    expect(progressBar(2, 4)).toBe('[####]');
    expect(progressBar(Number.NaN, 4)).toBe('[----]');
  });

  it('says when an active run has no live worker, with its last heartbeat', () => {
    const text = runDetail(
      run({ state: 'active', worker_alive: false, progress: progress({ updated: 1_000 }) }),
      1_000 + 312_000,
    );
    expect(text).toMatch(
      /^no live worker \(its lock expired; last heartbeat 5m12s ago\); a live worker takes the run over {2}120\/400/,
    );
    expect(runDetail(run({ state: 'active', worker_alive: true, progress: progress() }))).not.toContain(
      'no live worker',
    );
  });

  it("does not call a worker dead whose heartbeat is a second old when Redis lost the run's lock (a completion lost in an outage)", () => {
    const text = runDetail(
      run({ state: 'active', worker_alive: false, progress: progress({ updated: 1_000 }) }),
      1_000 + 1_000,
    );
    expect(text).not.toContain('no live worker');
    expect(text).toMatch(
      /^its worker is alive \(last heartbeat 1s ago\) but Redis holds no lock for the run \(lost in a Redis outage\?\); the stalled-job check requeues it, and a finished run's result\.json is reused, not trained again {2}120\/400/,
    );
  });

  it('shows progress, host, GPU and attempt for an active run', () => {
    const text = runDetail(run({ state: 'active', attempts_made: 1, progress: progress() }));
    expect(text).toBe('120/400  loss 1.235  52.1 rows/s  ETA 3m12s  node7 gpu3  attempt 2/3');
  });

  it('shows a pretraining base as "pretrain N/M", with its own ETA, apart from fine-tuning', () => {
    const pretraining = progress({ phase: 'pretraining', update: 120, total: 1000, eta_s: 65 });
    expect(runDetail(run({ state: 'active', progress: pretraining }))).toBe(
      'pretrain 120/1000  loss 1.235  52.1 rows/s  pretrain ETA 1m05s  node7 gpu3  attempt 1/3',
    );
    expect(runDetail(run({ state: 'active', progress: progress() }))).toMatch(/^120\/400 .* ETA 3m12s/);
    const bars = renderBars([audit([run({ state: 'active', progress: pretraining })])], 120);
    expect(bars).toContain('pretrain 120/1000');
  });

  it("says a run waits for the base another run builds, with that base's ETA, in every view", () => {
    const builder = run({
      run_id: 'run-aaaaaaaaaaaaaaaa',
      cell_id: 'dose=1,seed=0',
      state: 'active',
      progress: progress({ phase: 'pretraining', update: 300, total: 1000, eta_s: 65 }),
    });
    const waiting = run({
      state: 'active',
      progress: progress({
        phase: 'training',
        update: 0,
        total: 192,
        loss: null,
        rows_per_s: null,
        eta_s: null,
        updated: 40_000,
      }),
    });
    waiting.progress = {
      ...waiting.progress!,
      phase: 'waiting_base',
      waiting: { on: 'base_model', run_id: 'run-aaaaaaaaaaaaaaaa', pid: 77, since: 10_000 },
    };
    expect(runDetail(waiting, 40_000, [builder, waiting])).toBe(
      'waiting for base, built by run run-aaaaaaaaaaaaaaaa (pid 77)  waited 30s  base ETA 1m05s  node7 gpu3  attempt 1/3',
    );
    // The builder out of view (another audit not listed): the wait is still said, its ETA unknown.
    expect(runDetail(waiting, 40_000)).toMatch(
      /^waiting for base, built by run run-aaaaaaaaaaaaaaaa \(pid 77\) {2}waited 30s {2}base ETA - /,
    );
    const snapshot = [audit([builder, waiting])];
    expect(renderPlain(snapshot)).toContain('active     waiting for base, built by run run-aaaaaaaaaaaaaaaa (pid 77)');
    expect(renderPlain(snapshot)).toContain('base ETA 1m05s');
    expect(renderPlain(snapshot)).not.toMatch(/0\/192/);
    expect(renderBars(snapshot, 200)).toContain('waiting for base, built by run run-aaaaaaaaaaaaaaaa');
    expect(renderChanges(null, snapshot, new Date(40_000))).toContain(
      'waiting for base, built by run run-aaaaaaaaaaaaaaaa (pid 77)  waited 30s  base ETA 1m05s',
    );
    // status --json carries the phase and whom it waits for, as its schema documents them.
    const json = expectOutput<{ audits: AuditStatus[] }>(
      'status-output',
      JSON.stringify(versioned('status', { audits: snapshot })),
    );
    expect(json.audits[0]!.runs[1]!.progress).toMatchObject({
      phase: 'waiting_base',
      waiting: { run_id: 'run-aaaaaaaaaaaaaaaa', pid: 77 },
    });
  });

  it('shows eval progress, and the reason of a failed or delayed run', () => {
    expect(
      runDetail(
        run({
          state: 'active',
          progress: progress({ phase: 'evaluating', eval: { phase: 'final', done: 2, total: 8 }, eta_s: null }),
        }),
      ),
    ).toMatch(/^eval final 2\/8 .*ETA -/);
    expect(
      runDetail(
        run({
          state: 'failed',
          attempts_made: 1,
          failure: 'bad_input: rows.jsonl line 3',
          progress: progress({ gpu: null }),
        }),
      ),
    ).toBe('node7 cpu  attempt 1/3  bad_input: rows.jsonl line 3');
    expect(runDetail(run({ state: 'delayed', attempts_made: 1, failure: 'crash: segfault' }))).toBe(
      'attempt 1/3  crash: segfault',
    );
  });

  it('renders one plain line per run under an audit headline', () => {
    // Progress written just now: the audit ETA counts from the tracker's last write.
    const text = renderPlain([
      audit([
        run({ state: 'active', progress: progress({ updated: Date.now() }) }),
        run({ run_id: 'run-1111111111111111', state: 'completed', attempts_made: 1 }),
      ]),
    ]);
    const lines = text.trimEnd().split('\n');
    expect(lines[0]).toBe('audit-abcdefabcdef  email  running  2 runs: 1 active, 1 completed  audit ETA 3m12s');
    expect(lines[1]).toMatch(/^ {2}run-0123456789abcdef {2}dose=8,seed=0 {2}active {5}120\/400/);
    expect(lines[2]).toMatch(/run-1111111111111111 .* completed .* attempt 1\/3$/);
    expect(renderPlain([])).toBe('no audits in the queue\n');
  });

  it('spreads the audit ETA over the worker slots when they are known', () => {
    const now = Date.now();
    const finished = run({
      run_id: 'run-f',
      state: 'completed',
      started: new Date(now - 200_000).toISOString(),
      finished: new Date(now - 100_000).toISOString(),
    });
    const active = run({ state: 'active', progress: progress({ eta_s: 50, updated: now, phase_s: { training: 50 } }) });
    const snapshot = audit([finished, active, run({ run_id: 'run-q1' }), run({ run_id: 'run-q2' })]);
    // 100 s per run: with 2 slots the queued runs end at 100 and 150 s; counting only the active run as a worker, at 250 s.
    expect(renderPlain([snapshot], 2).split('\n')[0]).toMatch(/audit ETA 2m30s$/);
    expect(renderPlain([snapshot]).split('\n')[0]).toMatch(/audit ETA 4m10s$/);
    expect(renderBars([snapshot], 200, 2).split('\n')[0]).toMatch(/audit ETA 2m30s$/);
  });

  it('draws bars within the terminal width', () => {
    const text = renderBars([audit([run({ state: 'active', progress: progress() }), run({ state: 'completed' })])], 90);
    const lines = text.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^\[#{5}-{5}\] audit-abcdefabcdef/);
    expect(lines[1]).toMatch(/run +dose +seed +state/); // the varying axes as columns
    expect(lines[2]).toContain('[###-------]'); // 120/400
    expect(lines[2]).toMatch(/run-01234567 8 +0 +active/);
    expect(lines.every((l) => l.length <= 89)).toBe(true);
  });

  it('prints only what changed between snapshots', () => {
    const before = [audit([run({ state: 'waiting' }), run({ run_id: 'run-2', state: 'waiting' })])];
    const after = [audit([run({ state: 'active', progress: progress() }), run({ run_id: 'run-2', state: 'waiting' })])];
    const now = new Date('2026-01-01T10:20:30Z');
    expect(renderChanges(after, after, now)).toBe('');
    const text = renderChanges(before, after, now);
    expect(text.trimEnd().split('\n')).toEqual([
      '10:20:30   run-0123456789abcdef  dose=8,seed=0  active     120/400  loss 1.235  52.1 rows/s  ETA 3m12s  node7 gpu3  attempt 1/3',
    ]);
    expect(renderChanges(null, after, now)).toMatch(/^10:20:30 audit-abcdefabcdef/);
  });
});

describe('distinguishing axis values', () => {
  it('keeps every varying axis value in full, even on a narrow terminal', () => {
    const long = (dose: number) =>
      `visibility=encoded:chained-fruit,placement=uniform,population=mixed-dose,dose=${dose}`;
    const runs = [1, 2, 4, 16].map((dose, i) => ({
      run_id: `run-${i}`,
      cell_id: long(dose),
      state: 'waiting' as const,
      attempts_made: 0,
      max_attempts: 3,
      progress: null,
      failure: null,
      result: null,
      started: null,
      finished: null,
    }));
    const snapshot = [
      {
        audit_id: 'audit-1',
        name: 'g',
        state: 'queued' as const,
        submitted: '',
        cancelled_at: null,
        counts: { waiting: 4 },
        runs,
        summary: null,
      },
    ];
    const bars = renderBars(snapshot, 80).split('\n');
    expect(bars[1]).toMatch(/dose/);
    for (const dose of [1, 2, 4, 16])
      expect(bars.some((l) => new RegExp(`run-${[1, 2, 4, 16].indexOf(dose)} +${dose} +waiting`).test(l))).toBe(true);
    expect(renderPlain(snapshot)).toContain(long(16));
    expect(renderChanges(null, snapshot)).toContain(long(16));
  });
});
