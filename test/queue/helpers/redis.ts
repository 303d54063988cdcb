import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import {
  queueConnection,
  startEmbeddedRedis,
  type EmbeddedRedis,
  type QueueConnection,
} from '../../../src/queue/index.js';

/** One real redis-server per test file, on a free port, in a temporary folder. */
export async function startTestRedis(dir: string): Promise<EmbeddedRedis> {
  return startEmbeddedRedis({ dir: join(dir, 'redis') });
}

/** A connection with its own key prefix: tests sharing one server never see each other's jobs. */
export function isolatedConnection(redis: EmbeddedRedis): QueueConnection {
  return queueConnection(redis, `t${randomBytes(4).toString('hex')}`);
}
