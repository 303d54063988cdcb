// tier: slow (redis-server, the trainer)
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { ProgressEvent } from '../../src/contracts/progress.js';
import { contentHash } from '../../src/hash.js';
import { localRunner, startTrainer, type TrainerJob } from '../../src/runner/index.js';
import { STAND_IN_DIR, removeDir, tempDir } from '../queue/helpers/fixtures.js';

const root = tempDir('runner');
afterAll(() => removeDir(root));
const runner = localRunner({ trainerPath: STAND_IN_DIR, module: 'stand_in_trainer' });

function job(name: string, updates: number, knobs: Record<string, unknown> = {}, outName = 'output'): TrainerJob {
  const runDir = join(root, name);
  const manifestPath = join(runDir, 'manifest.json');
  const runId = `run-${contentHash({ updates, knobs }).slice(0, 16)}`;
  if (!existsSync(manifestPath)) {
    mkdirSync(runDir, { recursive: true });
    writeFileSync(
      manifestPath,
      JSON.stringify({
        run_id: runId,
        task: { params: { stand_in: knobs } },
        training: { updates, checkpoint_every: 5, batch_size: 2 },
      }),
    );
  }
  return { runId, runDir, manifestPath, outDir: join(runDir, outName), gpu: null, threads: 1 };
}

async function run(j: TrainerJob, options: { stopAfterUpdate?: number; stopGraceMs?: number } = {}) {
  const events: ProgressEvent[] = [];
  const badLines: string[] = [];
  const trainer = await startTrainer({
    runner,
    job: j,
    stderrLog: join(j.outDir, 'trainer.stderr.log'),
    stopGraceMs: options.stopGraceMs ?? 5_000,
    onEvent(event) {
      events.push(event);
      if (event.event === 'step' && options.stopAfterUpdate !== undefined && event.update >= options.stopAfterUpdate)
        trainer.stop();
    },
    onBadLine: (line) => badLines.push(line),
  });
  const outcome = await trainer.finished;
  return { outcome, events, badLines, pid: trainer.pid };
}

const acc = (j: TrainerJob) =>
  (
    JSON.parse(readFileSync(join(j.outDir, 'result.json'), 'utf8')) as {
      stand_in: { acc: string; attempts: { resumed_from: number }[] };
    }
  ).stand_in;

describe('startTrainer with the local runner', () => {
  it('relays the protocol and reports ok with the done event', async () => {
    const j = job('plain', 12);
    const { outcome, events } = await run(j);
    expect(outcome).toMatchObject({ outcome: 'ok', exitCode: 0, kind: 'ok' });
    expect(events[0]).toMatchObject({ event: 'started', total_updates: 12, resumed_from: null });
    expect(events.filter((e) => e.event === 'step')).toHaveLength(12);
    expect(events.at(-1)).toMatchObject({ event: 'done', result: 'result.json' });
    expect(outcome.done?.result).toBe('result.json');
    expect(existsSync(join(j.outDir, 'result.json'))).toBe(true);
  });

  it('stops on request after a checkpoint (exit 75), and a second start resumes to the same end state', async () => {
    const reference = job('plain', 12);
    const j = job('plain', 12, {}, 'interrupted');
    const first = await run(j, { stopAfterUpdate: 7 });
    expect(first.outcome).toMatchObject({ outcome: 'interrupted', exitCode: 75, kind: 'interrupted' });
    expect(first.events.some((e) => e.event === 'checkpoint')).toBe(true);
    const second = await run(j);
    expect(second.outcome.outcome).toBe('ok');
    const started = second.events[0];
    expect(started?.event === 'started' && started.resumed_from).toBeGreaterThanOrEqual(7);
    expect(second.events.filter((e) => e.event === 'step').length).toBeLessThan(12);
    expect(acc(j).acc).toBe(acc(reference).acc);
  });

  it('classifies planned failures from their exit code and error event', async () => {
    const bad = await run(job('bad', 5, { fail_exit: 2 }));
    expect(bad.outcome).toMatchObject({
      outcome: 'final',
      kind: 'bad_manifest',
      exitCode: 2,
      message: 'planned failure (exit 2)',
    });
    const crash = await run(job('crash', 5, { fail_exit: 1, fail_at: 2 }));
    expect(crash.outcome).toMatchObject({ outcome: 'retry', exitCode: 1 });
  });

  it('survives stray stdout lines and keeps them for the logs', async () => {
    const { outcome, badLines } = await run(job('junk', 3, { junk_stdout: true }));
    expect(outcome.outcome).toBe('ok');
    expect(badLines).toEqual(['Loading weights: 100%']);
  });

  it('kills a trainer that ignores SIGTERM once the grace period is over', async () => {
    const started = Date.now();
    const { outcome } = await run(job('stubborn', 100_000, { ignore_sigterm: true, step_s: 0.01 }), {
      stopAfterUpdate: 3,
      stopGraceMs: 300,
    });
    expect(outcome).toMatchObject({ outcome: 'interrupted', exitCode: null, signal: 'SIGKILL' });
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it('reports a missing interpreter as a final missing dependency', async () => {
    const missing = localRunner({
      python: join(root, 'no-such-python'),
      trainerPath: STAND_IN_DIR,
      module: 'stand_in_trainer',
    });
    const j = job('plain', 3);
    const trainer = await startTrainer({
      runner: missing,
      job: j,
      stderrLog: join(j.outDir, 'missing.log'),
      stopGraceMs: 1000,
      onEvent: () => undefined,
    });
    const outcome = await trainer.finished;
    expect(outcome).toMatchObject({ outcome: 'final', kind: 'missing_dependency' });
    expect(outcome.message).toContain('no-such-python');
  });
});

describe('the trainer environment', () => {
  it('does not inherit REDIS_URL (it may hold the queue password); the rest of the environment passes', async () => {
    const saved = process.env.REDIS_URL;
    process.env.REDIS_URL = 'redis://:s3cret@queue:6379/0';
    process.env.CANARY_TEST_KEEP = 'kept';
    const lines: string[] = [];
    try {
      const envRunner = { name: 'env', command: () => ({ file: '/usr/bin/env', args: [], env: { FROM_RUNNER: '1' } }) };
      const j = job('env', 1);
      const trainer = await startTrainer({
        runner: envRunner,
        job: j,
        stderrLog: join(j.outDir, 'trainer.stderr.log'),
        stopGraceMs: 1_000,
        onEvent: () => undefined,
        onBadLine: (l) => lines.push(l),
      });
      await trainer.finished;
    } finally {
      if (saved === undefined) delete process.env.REDIS_URL;
      else process.env.REDIS_URL = saved;
      delete process.env.CANARY_TEST_KEEP;
    }
    expect(lines).toContain('CANARY_TEST_KEEP=kept');
    expect(lines).toContain('FROM_RUNNER=1');
    expect(lines.filter((l) => l.startsWith('REDIS_URL='))).toEqual([]);
  });
});
