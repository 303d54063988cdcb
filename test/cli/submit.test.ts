// tier: slow (redis-server)
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openQueues, type EmbeddedRedis } from '../../src/queue/index.js';
import { runMain } from '../queue/helpers/main.js';
import { removeDir, tempDir, writeFixtureAudit } from '../queue/helpers/fixtures.js';
import { isolatedConnection, startTestRedis } from '../queue/helpers/redis.js';
import { expectOutput } from '../helpers/output-schema.js';

const TINY_GRID = fileURLToPath(new URL('../queue/fixtures/tiny-grid.yaml', import.meta.url));
const root = tempDir('cli-submit');
let redis: EmbeddedRedis;

beforeAll(async () => {
  redis = await startTestRedis(root);
});
afterAll(async () => {
  await redis?.stop();
  removeDir(root);
});

describe('canary-audit submit', () => {
  it('queues an audit folder once, expands and queues a grid, and explains bad Redis settings', async () => {
    const folderConn = isolatedConnection(redis);
    const gridConn = isolatedConnection(redis);
    const artifacts = join(root, 'artifacts');
    const audit = writeFixtureAudit(artifacts, 'submit', [{ updates: 5 }, { updates: 6 }]);
    const first = await runMain(['submit', audit.auditDir, '--redis', redis.url, '--json'], {
      CANARY_AUDIT_QUEUE_PREFIX: folderConn.prefix,
    });
    const grid = await runMain(
      ['submit', TINY_GRID, '--redis', redis.url, '--artifacts', artifacts, '--attempts', '4', '--json'],
      {
        CANARY_AUDIT_QUEUE_PREFIX: gridConn.prefix,
      },
    );
    const unreachable = await runMain(['submit', audit.auditDir, '--redis', 'redis://127.0.0.1:1']);
    const noScheme = await runMain(['submit', audit.auditDir, '--redis', 'localhost:6379']);
    expect(first.code).toBe(0);
    expect(expectOutput('submit-output', first.stdout)).toMatchObject({
      schema_version: 'canary-audit.submit-output/1',
      audit_id: audit.auditId,
      added: true,
      state: 'queued',
      runs: 2,
      audit_dir: audit.auditDir,
    });

    expect(grid.code, grid.stderr).toBe(0);
    const planned = expectOutput<{ audit_id: string; audit_dir: string; runs: number; added: boolean }>(
      'submit-output',
      grid.stdout,
    );
    expect(planned).toMatchObject({ added: true, runs: 1 });
    expect(planned.audit_dir).toBe(join(artifacts, 'audits', planned.audit_id));
    expect(existsSync(join(planned.audit_dir, 'audit.json'))).toBe(true);

    expect(unreachable.code).toBe(1);
    expect(unreachable.stderr.trim()).toBe(
      'canary-audit: cannot reach Redis at redis://127.0.0.1:1: connect ECONNREFUSED 127.0.0.1:1; check REDIS_URL/--redis (host, port, password, TLS)',
    );
    expect(noScheme.code).toBe(2);
    expect(noScheme.stderr.trim()).toBe(
      'canary-audit: --redis: "localhost:6379" has no scheme; write redis://localhost:6379',
    );

    const again = await runMain(['submit', audit.auditDir, '--redis', redis.url], {
      CANARY_AUDIT_QUEUE_PREFIX: folderConn.prefix,
    });
    expect(again.code).toBe(0);
    // The audit's state as status shows it, never a BullMQ internal state name.
    expect(again.stdout.trim()).toBe(`${audit.auditId} is already in the queue (queued); nothing added`);
    const againJson = await runMain(['submit', audit.auditDir, '--redis', redis.url, '--json'], {
      CANARY_AUDIT_QUEUE_PREFIX: folderConn.prefix,
    });
    expect(expectOutput('submit-output', againJson.stdout)).toMatchObject({ added: false, state: 'queued' });

    const queues = openQueues(folderConn);
    const gridQueues = openQueues(gridConn);
    try {
      expect(await queues.runs.getJobCounts('waiting')).toMatchObject({ waiting: 2 });
      const [job] = await gridQueues.runs.getWaiting();
      expect(job?.opts.attempts).toBe(4);
      expect(job?.data.manifest).toMatch(
        new RegExp(`^audits/${planned.audit_id}/runs/run-[0-9a-f]{16}/manifest.json$`),
      );
      expect(job?.id).toBe(job?.data.run_id);
    } finally {
      await queues.close();
      await gridQueues.close();
    }
  });
});
