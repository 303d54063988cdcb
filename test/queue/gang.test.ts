// tier: slow (redis-server, Python stand-in trainer)
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { collectStatus, openRedis, readFleet, submitAudit, type EmbeddedRedis } from '../../src/queue/index.js';
import { SlotBook, WorkerPool } from '../../src/worker/index.js';
import { localRunner } from '../../src/runner/index.js';
import { startWorker, type WorkerProcess } from './helpers/cli.js';
import { fastTuning, removeDir, standInEnv, tempDir, waitFor, writeFixtureAudit } from './helpers/fixtures.js';
import { isolatedConnection, startTestRedis } from './helpers/redis.js';

/**
 * Runs over several GPU slots (training.gpus): a worker takes all of a run's slots of one host at
 * once or none, starts it under torch.distributed.run with one rank per slot, and frees the slots
 * when it ends. The slots are fake GPUs ("0", "1", "2"): the stand-in trainer records the
 * CUDA_VISIBLE_DEVICES and WORLD_SIZE each attempt had and when.
 */
const root = tempDir('gang');
let redis: EmbeddedRedis;
const workers: WorkerProcess[] = [];

beforeAll(async () => {
  redis = await startTestRedis(root);
});
afterAll(async () => {
  for (const w of workers) w.process.kill('SIGKILL');
  await redis?.stop();
  removeDir(root);
});

describe('slot book', () => {
  it("takes all of a run's slots at once or none, and frees them", () => {
    const book = new SlotBook(3);
    expect(book.take(0, 1, 'a')).toEqual([0]);
    // Two of three are free: a run of three takes nothing.
    expect(book.take(1, 3, 'b')).toBeNull();
    expect(book.free()).toBe(2);
    expect(book.take(2, 2, 'c')).toEqual([1, 2]);
    expect([book.holder(0), book.holder(1), book.holder(2)]).toEqual(['a', 'c', 'c']);
    // A held slot cannot start a run of its own.
    expect(book.take(1, 1, 'd')).toBeNull();
    book.release([1, 2]);
    expect(book.take(1, 3, 'b')).toBeNull();
    book.release([0]);
    expect(book.take(1, 3, 'b')).toEqual([0, 1, 2]);
    expect(book.free()).toBe(0);
  });

  it('holds the host for a run over several slots that found too few free, until it has them or the hold lapses', () => {
    const book = new SlotBook(3);
    expect(book.take(0, 1, 'a', 0)).toEqual([0]);
    expect(book.take(1, 1, 'b', 0)).toEqual([1]);
    // g needs 3: refused, it reserves; a one-slot run may no longer take the free slot.
    expect(book.take(2, 3, 'g', 0)).toBeNull();
    book.reserve('g', 3, 1_000, 0);
    expect(book.reservedBy(10)).toBe('g');
    expect(book.take(2, 1, 'c', 10)).toBeNull();
    // A second gang does not take the reservation over, and is refused too.
    book.reserve('h', 2, 1_000, 10);
    expect(book.reservedBy(10)).toBe('g');
    expect(book.take(2, 2, 'h', 10)).toBeNull();
    // One-slot runs do not reserve; larger-than-host runs do not either.
    book.reserve('c', 1, 1_000, 10);
    book.reserve('x', 4, 1_000, 10);
    expect(book.reservedBy(10)).toBe('g');
    book.release([0]);
    book.release([1]);
    // g takes all three and the reservation ends with it.
    expect(book.take(1, 3, 'g', 20)).toEqual([0, 1, 2]);
    expect(book.reservedBy(20)).toBeNull();
    book.release([0, 1, 2]);

    // A reservation that is not renewed lapses: the slots are anyone's again.
    expect(book.take(0, 1, 'a', 100)).toEqual([0]);
    book.reserve('g', 3, 1_000, 100);
    expect(book.take(1, 1, 'b', 1_099)).toBeNull();
    // Renewed by g asking again.
    book.reserve('g', 3, 1_000, 1_000);
    expect(book.take(1, 1, 'b', 1_999)).toBeNull();
    expect(book.take(1, 1, 'b', 2_000)).toEqual([1]);
    expect(book.reservedBy(2_000)).toBeNull();
  });
});

interface Attempt {
  run: string;
  start: number;
  end: number;
  devices: string[];
  world: number;
  how: string;
}

function attempts(outDir: string, run: string): Attempt[] {
  const file = join(outDir, '.slots');
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .trim()
    .split('\n')
    .map((line) => {
      const [start, end, devices, world, how] = line.split(' ');
      return {
        run,
        start: Number(start),
        end: Number(end),
        devices: devices === '-' ? [] : (devices ?? '').split(','),
        world: Number(world),
        how: how ?? '',
      };
    });
}

describe('runs over several slots', () => {
  it('gang-allocates under contention: no two runs share a slot, 2-slot runs get 2 ranks, every slot is freed', async () => {
    const conn = isolatedConnection(redis);
    const artifacts = join(root, 'contention');
    // Two 2-slot runs cannot run together on 3 slots; four 1-slot runs compete for the same slots.
    const audit = writeFixtureAudit(artifacts, 'gang', [
      { updates: 12, gpus: 2, knobs: { step_s: 0.1 } },
      { updates: 12, gpus: 2, knobs: { step_s: 0.1 } },
      ...[0, 1, 2, 3].map(() => ({ updates: 10, knobs: { step_s: 0.1 } })),
    ]);
    const tuning = fastTuning({ lockMs: 4_000 });
    const pool = await WorkerPool.start({
      conn,
      artifactsDir: artifacts,
      runner: localRunner({ trainerPath: standInEnv().CANARY_AUDIT_TRAINER_PATH, module: 'stand_in_trainer' }),
      slots: ['0', '1', '2'].map((gpu) => ({ gpu, threads: null })),
      tuning,
      gangRetryMs: 300,
    });
    try {
      await submitAudit(conn, artifacts, audit, tuning);
      const status = await waitFor(
        'the audit to finish',
        async () => {
          const [s] = await collectStatus(conn, audit.auditId);
          return s?.state === 'finished' ? s : undefined;
        },
        240_000,
        250,
      );
      expect(status.counts.completed).toBe(6);
      const all = audit.runs.flatMap((r) => attempts(join(r.manifestPath, '..', 'output'), r.runId));
      const finishedAttempts = all.filter((a) => a.how === 'done');
      expect(finishedAttempts).toHaveLength(6);
      audit.runs.forEach((r) => {
        const mine = finishedAttempts.filter((a) => a.run === r.runId);
        expect(mine).toHaveLength(1);
        const need = r.gpus ?? 1;
        expect(new Set(mine[0]?.devices).size).toBe(need);
        expect(mine[0]?.world).toBe(need);
        if (need > 1) {
          // The other rank was started by torch.distributed.run and ended at once.
          expect(readFileSync(join(r.manifestPath, '..', 'output', '.ranks'), 'utf8')).toMatch(/^1 2 \d+\n$/);
        }
      });
      // Any two attempts that overlapped in time had disjoint slots.
      for (const a of all) {
        for (const b of all) {
          if (a === b || a.end <= b.start || b.end <= a.start) continue;
          expect(
            a.devices.filter((d) => b.devices.includes(d)),
            `${a.run} and ${b.run} overlapped`,
          ).toEqual([]);
        }
      }
      // The two 2-slot runs could not both fit on 3 slots: they ran one after the other.
      const gangs = finishedAttempts.filter((a) => a.world === 2);
      expect(gangs[0] && gangs[1] && (gangs[0].end <= gangs[1].start || gangs[1].end <= gangs[0].start)).toBe(true);
      // Every slot is free again, in the fleet's view too.
      const client = openRedis(conn);
      try {
        await waitFor(
          'the slots to show idle',
          async () => {
            const [worker] = await readFleet(client, conn.prefix);
            return worker?.slots.length === 3 && worker.slots.every((s) => s.run_id === null) ? worker : undefined;
          },
          10_000,
        );
      } finally {
        client.disconnect();
      }

      // More slots than the fleet's largest host has: refused at submit, nothing queued.
      const tooBig = writeFixtureAudit(artifacts, 'too-big', [{ updates: 2, gpus: 4 }]);
      await expect(submitAudit(conn, artifacts, tooBig, tuning)).rejects.toThrow(
        new RegExp(
          `^training.gpus: runs need 4 GPUs of one host \\(training.gpus\\), but the largest worker in the fleet, ${pool.host} \\(.+\\), has 3 GPU slots; `,
        ),
      );
      await expect(collectStatus(conn, tooBig.auditId)).rejects.toThrow(/no audit .* on this Redis/);
    } finally {
      await pool.shutdown();
    }
  }, 300_000);
});

describe('gang priority', () => {
  it('a run over several slots that found too few free starts before one-slot runs queued after it', async () => {
    const conn = isolatedConnection(redis);
    const artifacts = join(root, 'priority');
    const tuning = fastTuning({ lockMs: 4_000 });
    const pool = await WorkerPool.start({
      conn,
      artifactsDir: artifacts,
      runner: localRunner({ trainerPath: standInEnv().CANARY_AUDIT_TRAINER_PATH, module: 'stand_in_trainer' }),
      slots: ['0', '1'].map((gpu) => ({ gpu, threads: null })),
      tuning,
      gangRetryMs: 300,
    });
    try {
      // Both slots busy, one for longer than the other: the short one frees a slot first.
      const busy = writeFixtureAudit(artifacts, 'busy', [
        { updates: 15, knobs: { step_s: 0.1 } },
        { updates: 40, knobs: { step_s: 0.1 } },
      ]);
      await submitAudit(conn, artifacts, busy, tuning);
      await waitFor(
        'both slots busy',
        async () => {
          const [s] = await collectStatus(conn, busy.auditId);
          return s?.runs.length === 2 && s.runs.every((r) => r.state === 'active' && (r.progress?.update ?? 0) >= 1)
            ? s
            : undefined;
        },
        60_000,
        100,
      );
      // Then a 2-slot run, then one-slot runs that could each take the slot the short run frees.
      const gang = writeFixtureAudit(artifacts, 'gang-first', [{ updates: 4, gpus: 2, knobs: { step_s: 0.1 } }]);
      await submitAudit(conn, artifacts, gang, tuning);
      const singles = writeFixtureAudit(
        artifacts,
        'singles',
        [0, 1, 2, 3].map((i) => ({ updates: 5 + i, knobs: { step_s: 0.1 } })),
      );
      await submitAudit(conn, artifacts, singles, tuning);
      for (const audit of [busy, gang, singles]) {
        await waitFor(
          `${audit.name} to finish`,
          async () => {
            const [s] = await collectStatus(conn, audit.auditId);
            return s?.state === 'finished' ? s : undefined;
          },
          120_000,
          250,
        );
      }
      const done = (a: typeof busy) =>
        a.runs.map((r) => attempts(join(r.manifestPath, '..', 'output'), r.runId).find((x) => x.how === 'done')!);
      const [g] = done(gang);
      const [short, long] = done(busy);
      // The gang waited for the long run (it could not start beside it) ...
      expect(g!.start).toBeGreaterThanOrEqual(long!.end - 0.05);
      expect(g!.world).toBe(2);
      // ... and no one-slot run queued after it took the slot the short run freed meanwhile.
      for (const s of done(singles))
        expect(s.start, 'a one-slot run started before the gang run').toBeGreaterThan(g!.start);
      expect(short!.end).toBeLessThan(long!.end);
    } finally {
      await pool.shutdown();
    }
  }, 240_000);
});

/** Live processes (zombies aside) whose command line names `arg`: a run's launcher and its ranks. */
function processesWith(arg: string): number[] {
  return readdirSync('/proc')
    .filter((n) => /^\d+$/.test(n))
    .flatMap((n) => {
      try {
        if (!readFileSync(`/proc/${n}/cmdline`, 'utf8').split('\0').includes(arg)) return [];
        return /^State:\s*Z/m.test(readFileSync(`/proc/${n}/status`, 'utf8')) ? [] : [Number(n)];
      } catch {
        return [];
      }
    });
}

/** The stand-in's "model" after updates 1..total, each applied once, in order. */
function chain(runId: string, total: number): string {
  let acc = runId;
  for (let u = 1; u <= total; u += 1) acc = createHash('sha256').update(`${acc}:${u}`).digest('hex');
  return acc;
}

describe.skipIf(process.platform !== 'linux')('a worker killed -9 during a run over several slots', () => {
  it('takes the launcher and every rank with it within seconds (the last one checkpointed); a new worker resumes the run and applies every update once', async () => {
    const conn = isolatedConnection(redis);
    const artifacts = join(root, 'killed');
    const audit = writeFixtureAudit(artifacts, 'gang-kill', [
      { updates: 400, gpus: 2, knobs: { step_s: 0.05, ranks_wait: true } },
    ]);
    const run = audit.runs[0]!;
    const outDir = join(run.manifestPath, '..', 'output');
    const tuning = fastTuning({ lockMs: 4_000 });
    await submitAudit(conn, artifacts, audit, tuning);
    const args = ['--cpu', '2', '--redis', redis.url, '--artifacts', artifacts];
    const env = { CANARY_AUDIT_QUEUE_PREFIX: conn.prefix };
    const first = await startWorker(args, env);
    workers.push(first);

    // Both ranks up and a checkpoint written: the launcher and two ranks name the manifest.
    const tree = await waitFor(
      'the launcher and both ranks, past a checkpoint',
      () => {
        const pids = processesWith(run.manifestPath);
        const ranks = existsSync(join(outDir, '.ranks')) ? readFileSync(join(outDir, '.ranks'), 'utf8') : '';
        return pids.length >= 3 && /^1 2 \d+$/m.test(ranks) && existsSync(join(outDir, 'checkpoints', 'state.json'))
          ? pids
          : undefined;
      },
      60_000,
      100,
    );
    first.process.kill('SIGKILL');
    await first.process;
    const killedAt = Date.now();
    await waitFor('every process of the run to end', () => processesWith(run.manifestPath).length === 0, 10_000, 100);
    expect(Date.now() - killedAt).toBeLessThan(10_000);
    expect(tree.every((pid) => processesWith(run.manifestPath).includes(pid) === false)).toBe(true);
    // Rank 0 stopped on the launcher's SIGTERM: checkpointed, not killed.
    const trained = () =>
      readFileSync(join(outDir, '.trained'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => l.split(' '));
    expect(trained().map((t) => t[3])).toEqual(['interrupted']);

    const second = await startWorker(args, env);
    workers.push(second);
    const status = await waitFor(
      'the audit to finish',
      async () => {
        const [s] = await collectStatus(conn, audit.auditId);
        return s?.state === 'finished' ? s : undefined;
      },
      120_000,
      250,
    );
    second.process.kill('SIGTERM');
    await second.process;
    expect(status.counts).toEqual({ completed: 1 });
    // The second attempt started where the first stopped, and every update was applied once.
    const [a, b] = trained() as [string[], string[]];
    expect(b[1]).toBe(a[2]);
    expect(b.slice(2)).toEqual(['400', 'done']);
    const result = JSON.parse(readFileSync(join(outDir, 'result.json'), 'utf8')) as {
      stand_in: { acc: string; updates: number };
    };
    expect(result.stand_in).toMatchObject({ acc: chain(run.runId, 400), updates: 400 });
  }, 240_000);
});
