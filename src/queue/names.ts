/**
 * Names of everything canary-audit keeps in Redis. All BullMQ keys live under one prefix, so a
 * shared Redis can hold other applications (or a second canary-audit deployment with its own
 * $CANARY_AUDIT_QUEUE_PREFIX) without collisions.
 *
 *   <prefix>:runs:*                 BullMQ queue of fine-tuning runs (job id = run id)
 *   <prefix>:audits:*               BullMQ queue of audit parents (job id = audit id)
 *   <prefix>:cancelled:<audit_id>   string: ISO time the audit was cancelled (checked on job start)
 *   <prefix>:cancelled-runs:<audit_id>  hash run_id -> JSON {time, state}: runs removed by cancel
 *   <prefix>:cancel                 pub/sub channel: {"audit_id": ...} tells every worker to stop
 */
export const DEFAULT_PREFIX = 'canary-audit';
export const RUNS_QUEUE = 'runs';
export const AUDITS_QUEUE = 'audits';
/** Job names (BullMQ job.name): what kind of work a job is. */
export const RUN_JOB = 'train-and-score';
export const AUDIT_JOB = 'audit';

export function queuePrefix(): string {
  return process.env.CANARY_AUDIT_QUEUE_PREFIX || DEFAULT_PREFIX;
}

export interface QueueKeys {
  prefix: string;
  cancelled(auditId: string): string;
  cancelledRuns(auditId: string): string;
  cancelChannel: string;
}

export function queueKeys(prefix: string = queuePrefix()): QueueKeys {
  return {
    prefix,
    cancelled: (auditId) => `${prefix}:cancelled:${auditId}`,
    cancelledRuns: (auditId) => `${prefix}:cancelled-runs:${auditId}`,
    cancelChannel: `${prefix}:cancel`,
  };
}
