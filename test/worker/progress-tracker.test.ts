import { describe, expect, it } from 'vitest';
import type { ProgressEvent } from '../../src/contracts/progress.js';
import { ProgressTracker } from '../../src/worker/progress-tracker.js';

const base = { host: 'gpu-host-1', gpu: '2', worker_pid: 4242, attempt: 1 };
const step = (update: number, t: number): ProgressEvent => ({
  v: 1,
  event: 'step',
  t,
  update,
  total: 100,
  loss: 2 / update,
  lr: 1e-3,
  rows_per_s: 32,
});

describe('ProgressTracker', () => {
  it('tells a trainer that trained from one that found the run done (`done` alone)', () => {
    const found = new ProgressTracker(base, { progressMs: 1_000, stepLogMs: 10_000 }, 0);
    found.apply({ v: 1, event: 'done', t: 1, result: 'result.json', wall_s: 0 }, 10);
    expect(found.trained).toBe(false);
    const trained = new ProgressTracker(base, { progressMs: 1_000, stepLogMs: 10_000 }, 0);
    trained.apply(
      {
        v: 1,
        event: 'started',
        t: 1,
        run_id: 'run-x',
        pid: 77,
        device: 'cpu',
        backend: 'tiny',
        total_updates: 10,
        resumed_from: 5,
      },
      10,
    );
    trained.apply({ v: 1, event: 'done', t: 2, result: 'result.json', wall_s: 1 }, 20);
    expect(trained.trained).toBe(true);
  });

  it('starts from the resumed update and measures the ETA on this attempt only', () => {
    const tracker = new ProgressTracker(base, { progressMs: 1_000, stepLogMs: 10_000 }, 0);
    const started = tracker.apply(
      {
        v: 1,
        event: 'started',
        t: 100,
        run_id: 'run-x',
        pid: 77,
        device: 'cuda:0',
        backend: 'hf',
        total_updates: 100,
        resumed_from: 40,
      },
      0,
    );
    expect(started.write).toBe(true);
    expect(started.log).toMatch(/resumed_from=40/);
    expect(tracker.progress).toMatchObject({
      phase: 'training',
      update: 40,
      total: 100,
      trainer_pid: 77,
      device: 'cuda:0',
      gpu: '2',
    });

    tracker.apply(step(41, 200), 10);
    expect(tracker.progress.eta_s).toBeNull(); // one point: no rate yet
    tracker.apply(step(51, 210), 20); // 10 updates in 10 s -> 1 update/s, 49 left
    expect(tracker.progress.eta_s).toBeCloseTo(49, 6);
    expect(tracker.progress.loss).toBeCloseTo(2 / 51);
  });

  it('puts each checkpoint a resume passed over into the job log as a warning', () => {
    const tracker = new ProgressTracker(base, { progressMs: 1_000, stepLogMs: 10_000 }, 0);
    const skipped = [{ update: 185, reason: 'weights.pt changed after it was written (sha256 ...)' }];
    const fellBack = tracker.apply(
      {
        v: 1,
        event: 'started',
        t: 1,
        run_id: 'run-x',
        pid: 77,
        device: 'cpu',
        backend: 'tiny',
        total_updates: 200,
        resumed_from: 180,
        checkpoints_skipped: skipped,
      },
      0,
    );
    expect(fellBack.log).toBe(
      'started pid=77 device=cpu backend=tiny updates=200 resumed_from=180; warning: checkpoint update 185 not resumed from: weights.pt changed after it was written (sha256 ...)',
    );
    const fresh = new ProgressTracker(base, { progressMs: 1_000, stepLogMs: 10_000 }, 0).apply(
      {
        v: 1,
        event: 'started',
        t: 1,
        run_id: 'run-x',
        pid: 77,
        device: 'cpu',
        backend: 'tiny',
        total_updates: 200,
        resumed_from: null,
        checkpoints_skipped: skipped,
      },
      0,
    );
    expect(fresh.log).toMatch(/not resumed from: .* \(started from scratch\)$/);
  });

  it('follows the base pretraining as its own phase, with an ETA that does not mix the two phases', () => {
    const tracker = new ProgressTracker(base, { progressMs: 60_000, stepLogMs: 60_000 }, 0);
    tracker.apply(
      {
        v: 1,
        event: 'started',
        t: 0,
        run_id: 'run-x',
        pid: 77,
        device: 'cpu',
        backend: 'tiny',
        total_updates: 100,
        resumed_from: null,
      },
      0,
    );
    const pre = (update: number, t: number): ProgressEvent => ({
      v: 1,
      event: 'step',
      phase: 'pretrain',
      t,
      update,
      total: 1000,
      loss: 1,
      lr: 6e-3,
      rows_per_s: 160,
    });
    const first = tracker.apply(pre(1, 1), 1);
    expect(first.log).toBe('pretrain step 1/1000 loss=1.0000 rows/s=160.0');
    expect(first.write).toBe(true);
    tracker.apply(pre(101, 11), 2); // 10 pretraining updates per second, 899 left
    expect(tracker.progress).toMatchObject({ phase: 'pretraining', update: 101, total: 1000 });
    expect(tracker.progress.eta_s).toBeCloseTo(89.9, 6);
    tracker.apply(pre(1000, 100.9), 3);
    // Fine-tuning starts: written at once, and its ETA waits for a rate of its own.
    const fine = tracker.apply(step(1, 101), 4);
    expect(fine).toEqual({ write: true, log: 'step 1/100 loss=2.0000 rows/s=32.0' });
    expect(tracker.progress).toMatchObject({ phase: 'training', update: 1, total: 100, eta_s: null });
    tracker.apply(step(3, 102), 5); // 2 updates per second, 97 left
    expect(tracker.progress.eta_s).toBeCloseTo(48.5, 6);
  });

  it("shows a wait for another run's base as its own phase, naming the builder, until the wait ends", () => {
    const tracker = new ProgressTracker(base, { progressMs: 60_000, stepLogMs: 60_000 }, 0);
    tracker.apply(
      {
        v: 1,
        event: 'started',
        t: 0,
        run_id: 'run-y',
        pid: 78,
        device: 'cpu',
        backend: 'tiny',
        total_updates: 192,
        resumed_from: null,
      },
      0,
    );
    const wait = tracker.apply(
      { v: 1, event: 'wait', t: 1, on: 'base_model', key: 'k', holder_pid: 77, holder_run: 'run-x', ended: false },
      1_000,
    );
    expect(wait).toEqual({ write: true, log: 'waiting for the base model, built by run run-x (pid 77)' });
    expect(tracker.progress).toMatchObject({
      phase: 'waiting_base',
      update: 0,
      total: 192,
      eta_s: null,
      waiting: { on: 'base_model', run_id: 'run-x', pid: 77, since: 1_000 },
    });
    // The holder changes (another waiter took the lock first): the wait goes on, from when it began.
    tracker.apply({ v: 1, event: 'wait', t: 5, on: 'base_model', holder_pid: 79, ended: false }, 5_000);
    expect(tracker.progress.waiting).toEqual({ on: 'base_model', run_id: null, pid: 79, since: 1_000 });
    const ended = tracker.apply({ v: 1, event: 'wait', t: 70, on: 'base_model', ended: true, waited_s: 69.2 }, 70_000);
    expect(ended).toEqual({ write: true, log: 'base model ready after waiting 69.2 s' });
    expect(tracker.progress).toMatchObject({ phase: 'training', waiting: null });
  });

  it('throttles step writes and step logs but never other events', () => {
    const tracker = new ProgressTracker(base, { progressMs: 1_000, stepLogMs: 5_000 }, 0);
    const outputs = [0, 200, 400, 1_100, 1_300, 5_200].map((now, i) => tracker.apply(step(i + 1, now / 1000), now));
    expect(outputs.map((o) => o.write)).toEqual([true, false, false, true, false, true]);
    expect(outputs.map((o) => o.log !== null)).toEqual([true, false, false, false, false, true]);
    const checkpoint = tracker.apply(
      { v: 1, event: 'checkpoint', t: 6, update: 6, path: 'checkpoints/update-6' },
      5_300,
    );
    expect(checkpoint).toEqual({ write: true, log: 'checkpoint update=6 checkpoints/update-6' });
    expect(tracker.progress.last_checkpoint).toBe(6);
  });

  it('always writes the last step, then follows eval and done', () => {
    const tracker = new ProgressTracker(base, { progressMs: 60_000, stepLogMs: 60_000 }, 0);
    tracker.apply(step(99, 1), 1);
    expect(tracker.apply(step(100, 2), 2).write).toBe(true);
    const evalStart = tracker.apply({ v: 1, event: 'eval', t: 3, phase: 'final', done: 0, total: 8 }, 3);
    expect(evalStart.log).toBe('eval final 0/8');
    expect(tracker.progress.eta_s).toBeNull(); // no pace yet
    // 3 probes in 3 s: 5 left take 5 s. The ETA while evaluating is that of the evaluation.
    expect(tracker.apply({ v: 1, event: 'eval', t: 6, phase: 'final', done: 3, total: 8 }, 3_003).log).toBeNull();
    expect(tracker.progress).toMatchObject({
      phase: 'evaluating',
      eval: { phase: 'final', done: 3, total: 8 },
      eta_s: 5,
    });
    tracker.apply({ v: 1, event: 'done', t: 7, result: 'result.json', wall_s: 12.5 }, 4_000);
    expect(tracker.progress.phase).toBe('finishing');
  });
});
