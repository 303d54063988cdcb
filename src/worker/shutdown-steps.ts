import type { Redis } from 'ioredis';

/**
 * The bounds of a worker's shutdown after SIGTERM. A shutdown must end whatever Redis does: it may
 * be gone (connections reconnecting), or up but silent (paused, partitioned mid-connection). Every
 * step that talks to Redis therefore waits at most its share of SHUTDOWN_MARGIN_MS, and what is
 * not done by then is given up: the run's lock expires and the stalled-job check hands it on.
 *
 *   stop grace            trainers checkpoint and exit (SIGKILL at the end of it)
 *   + TRAINER_REAP_MS     a killed trainer's exit is reaped
 *   + REDIS_PROBE_MS      does Redis answer at all? if not, every Redis step is skipped
 *   + HANDBACK_MS         each run moved back to the front of the queue (no attempt spent)
 *   + CLOSE_MS            BullMQ's workers finish what they fetched; the fleet goodbye
 *   = at most stop grace + 14 s, inside SHUTDOWN_MARGIN_MS (15 s)
 */
export const SHUTDOWN_MARGIN_MS = 15_000;
export const TRAINER_REAP_MS = 2_000;
export const REDIS_PROBE_MS = 2_000;
export const HANDBACK_MS = 5_000;
export const CLOSE_MS = 5_000;

/** True when `work` settled within `ms`; false when the time ran out first (`work` is left running). */
export async function within(work: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const settled = work.then(
    () => true,
    () => true,
  );
  try {
    return await Promise.race([
      settled,
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(false), Math.max(0, ms));
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Why Redis cannot be used to hand runs back, or null when it answers a PING within `ms`. A client
 * that is not connected fails at once; a connected one whose server does not answer (paused, or
 * the link gone without a reset) fails after `ms`.
 */
export async function redisSilence(client: Redis, ms: number): Promise<string | null> {
  if (client.status !== 'ready') return `Redis connection ${client.status}`;
  let failed: string | null = null;
  const ping = client.ping().catch((error: unknown) => {
    failed = `Redis PING failed: ${(error as Error).message}`;
  });
  if (!(await within(ping, ms))) return `Redis did not answer PING within ${(ms / 1000).toFixed(0)} s`;
  return failed;
}
