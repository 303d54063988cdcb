import { FlowProducer, Queue } from 'bullmq';
import { Redis, type RedisOptions } from 'ioredis';
import type { RedisTarget } from './connection.js';
import type { AuditJobData, AuditReturn, RunJobData, RunReturn } from './job-data.js';
import { AUDITS_QUEUE, RUNS_QUEUE, queueKeys, queuePrefix, type QueueKeys } from './names.js';

/** Where canary-audit's queues live: Redis connection options plus the key prefix. */
export interface QueueConnection {
  options: RedisOptions;
  redacted: string;
  prefix: string;
  keys: QueueKeys;
}

export function queueConnection(target: RedisTarget, prefix: string = queuePrefix()): QueueConnection {
  return { options: target.options, redacted: target.redacted, prefix, keys: queueKeys(prefix) };
}

/** The producer-side handles (submit, status, cancel): closed together. */
export interface QueueHandles {
  runs: Queue<RunJobData, RunReturn>;
  audits: Queue<AuditJobData, AuditReturn>;
  close(): Promise<void>;
}

export function openQueues(conn: QueueConnection): QueueHandles {
  const runs = new Queue<RunJobData, RunReturn>(RUNS_QUEUE, { connection: conn.options, prefix: conn.prefix });
  const audits = new Queue<AuditJobData, AuditReturn>(AUDITS_QUEUE, { connection: conn.options, prefix: conn.prefix });
  // Errors surface through the awaited calls; the emitter copies must not crash the process.
  runs.on('error', () => undefined);
  audits.on('error', () => undefined);
  return {
    runs,
    audits,
    async close() {
      await Promise.all([runs.close(), audits.close()]);
    },
  };
}

export function openFlowProducer(conn: QueueConnection): FlowProducer {
  const flow = new FlowProducer({ connection: conn.options, prefix: conn.prefix });
  flow.on('error', () => undefined);
  return flow;
}

/** The run id inside a BullMQ job key such as `canary-audit:runs:run-0123456789abcdef`. */
export function jobIdFromKey(key: string): string {
  return key.slice(key.lastIndexOf(':') + 1);
}

/**
 * A plain ioredis client for canary-audit's own keys (cancel flags, pub/sub). `longLived` clients
 * (workers) retry forever across a Redis restart; others give up quickly.
 */
export function openRedis(conn: QueueConnection, longLived = false): Redis {
  const client = new Redis({
    ...conn.options,
    ...(longLived ? { maxRetriesPerRequest: null } : { maxRetriesPerRequest: 3 }),
  });
  client.on('error', () => undefined);
  return client;
}
