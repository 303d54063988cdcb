import type { RunWait } from './job-data.js';
import type { RunStatus } from './status.js';

/** "run <id> (pid N)", "pid N" or "another trainer": who builds the base a run waits for. */
export function waitHolder(wait: Pick<RunWait, 'run_id' | 'pid'>): string {
  if (wait.run_id) return `run ${wait.run_id}${wait.pid !== null ? ` (pid ${wait.pid})` : ''}`;
  return wait.pid !== null ? `pid ${wait.pid}` : 'another trainer';
}

/**
 * What a run in phase `waiting_base` waits for, in words: "waiting for base, built by run X", and
 * the seconds the base has left when the builder is among `peers` and pretraining (else null).
 */
export function baseWait(
  run: RunStatus,
  peers: readonly RunStatus[] = [],
): { text: string; eta_s: number | null } | null {
  const wait = run.progress?.phase === 'waiting_base' ? run.progress.waiting : null;
  if (!wait) return null;
  const builder =
    wait.run_id !== null ? peers.find((r) => r.run_id === wait.run_id && r.state === 'active') : undefined;
  const eta = builder?.progress?.phase === 'pretraining' ? builder.progress.eta_s : null;
  return {
    text: `waiting for base, built by ${waitHolder(wait)}`,
    eta_s: eta !== null && Number.isFinite(eta) ? eta : null,
  };
}
