/**
 * The shortest job lock tested under CPU starvation, in ms. BullMQ renews a job's lock from the
 * worker's event loop (every lockMs/4, each renewal extending it by lockMs); a worker process
 * starved of CPU for longer than the lock misses its renewals, and another worker takes the run
 * over. Each takeover counts towards --max-stalled, and past it a healthy run fails for good ("job
 * stalled more than allowable limit"). The partition drill (`bench/partition.ts`, 64 workers, 2
 * cores, docs/operations.md) failed 38 of 96 runs so with 2 s locks at load average 33–46, and
 * none with 10 s locks at the same load.
 */
export const TESTED_LOCK_MS = 10_000;

/** A warning for a lock shorter than the tested floor (tests use 2 s on purpose), or null. */
export function shortLockWarning(lockMs: number): string | null {
  if (lockMs >= TESTED_LOCK_MS) return null;
  return (
    `--lock-ms ${lockMs} is shorter than ${TESTED_LOCK_MS} ms, the shortest lock tested on a CPU-starved host: ` +
    `a worker process that gets no CPU for ${(lockMs / 1000).toFixed(1)} s loses its runs to other workers, and a run ` +
    `taken over more than --max-stalled times fails; use ${TESTED_LOCK_MS} ms or more (default 30000) outside tests`
  );
}
