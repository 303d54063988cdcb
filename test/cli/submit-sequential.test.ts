// tier: slow (redis-server)
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { collectStatus, type EmbeddedRedis } from '../../src/queue/index.js';
import { runMain } from '../queue/helpers/main.js';
import { removeDir, tempDir } from '../queue/helpers/fixtures.js';
import { isolatedConnection, startTestRedis } from '../queue/helpers/redis.js';
import { expectOutput } from '../helpers/output-schema.js';

/** `submit` of a sequential grid queues its first look only and prints the command that continues it. */
const GRID = fileURLToPath(new URL('../e2e/sequential-audit.yaml', import.meta.url));
const root = tempDir('cli-submit-seq');
let redis: EmbeddedRedis;

beforeAll(async () => {
  redis = await startTestRedis(root);
});
afterAll(async () => {
  await redis?.stop();
  removeDir(root);
});

describe('canary-audit submit, sequential replicates', () => {
  it('queues the first min seeds, records the look, and says how to continue', async () => {
    const conn = isolatedConnection(redis);
    const artifacts = join(root, 'artifacts');
    const env = { CANARY_AUDIT_QUEUE_PREFIX: conn.prefix };
    const json = await runMain(['submit', GRID, '--redis', redis.url, '--artifacts', artifacts, '--json'], env);
    expect(json.code, json.stderr).toBe(0);
    const out = expectOutput<{ audit_id: string; audit_dir: string; runs: number; added: boolean }>(
      'submit-output',
      json.stdout,
    );
    // The grid plans 3 seeds (max); the first look takes 2 (min).
    expect(out).toMatchObject({ added: true, runs: 2 });
    const record = JSON.parse(readFileSync(join(out.audit_dir, 'sequential.json'), 'utf8')) as {
      taken: string[];
      pending_look: number;
      looks: unknown[];
    };
    expect(record).toMatchObject({ pending_look: 1, looks: [] });
    expect(record.taken).toHaveLength(2);
    const [status] = await collectStatus(conn, out.audit_id);
    expect(status?.runs.map((r) => r.run_id).sort()).toEqual([...record.taken].sort());
    expect(status?.sequential).toEqual({ look: 1, seeds: 2, max: 3, undecided: 0, decided: 0, done: false });

    // Again, as text: nothing added, and the command that continues the looks.
    const text = await runMain(['submit', GRID, '--redis', redis.url, '--artifacts', artifacts], env);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toContain(`${out.audit_id} is already in the queue (queued); nothing added`);
    expect(text.stdout).toMatch(
      /sequential replicates: only the first look's runs are queued; continue .*: .* run \S+ --redis /,
    );
    const status2 = await runMain(['status', out.audit_id, '--redis', redis.url], env);
    expect(status2.stdout).toContain('seed 2 of ≤3: first look');
  });
});
