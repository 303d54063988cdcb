// tier: slow (redis-server)
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { EmbeddedRedisKeeper } from '../../src/app/redis-keeper.js';
import { removeDir, tempDir, waitFor } from '../queue/helpers/fixtures.js';

/** `run`'s private Redis dying mid-audit (killed by hand or by the OOM killer) is started again. */
const root = tempDir('keeper');
afterAll(() => removeDir(root));

describe('the private redis-server of run', () => {
  it('comes back on the same port and password, with its data, after a kill -9', async () => {
    const keeper = await EmbeddedRedisKeeper.start(join(root, 'redis'), 200);
    const first = keeper.server;
    const client = new Redis({ ...first.options, maxRetriesPerRequest: null, retryStrategy: () => 100 });
    client.on('error', () => undefined);
    try {
      await client.set('canary', 'f007');
      await new Promise((r) => setTimeout(r, 1_200)); // appendfsync everysec
      process.kill(first.pid, 'SIGKILL');
      await waitFor('a new redis-server', () => keeper.server.pid !== first.pid, 20_000);
      expect(keeper.server.port).toBe(first.port);
      expect(await client.get('canary')).toBe('f007');
    } finally {
      client.disconnect();
      await keeper.stop();
    }
    expect(() => process.kill(keeper.server.pid, 0)).toThrow();
  });
});
