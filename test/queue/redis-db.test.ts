// tier: slow (redis-server)
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assertRedisReachable, parseRedisUrl, type EmbeddedRedis } from '../../src/queue/index.js';
import { removeDir, tempDir } from './helpers/fixtures.js';
import { startTestRedis } from './helpers/redis.js';

/** A database number the server does not have must fail in one line, never fall back to db 0. */
const root = tempDir('redis-db');
let redis: EmbeddedRedis;
beforeAll(async () => {
  redis = await startTestRedis(join(root, 'srv'));
});
afterAll(async () => {
  await redis?.stop();
  removeDir(root);
});

const withDb = (db: number) => parseRedisUrl(redis.url.replace(/\/0$/, `/${db}`), 'REDIS_URL');

describe('Redis database number', () => {
  it('accepts a database the server has', async () => {
    await expect(assertRedisReachable(withDb(15))).resolves.toBeUndefined();
  });

  it("refuses one outside the server's `databases` range, naming the range and hiding the password", async () => {
    const error = await assertRedisReachable(withDb(99)).then(
      () => null,
      (e: Error) => e,
    );
    expect(error?.message).toMatch(
      /^REDIS_URL: database 99 does not exist on redis:\/\/:\*\*\*@127\.0\.0\.1:\d+\/99 \(it has 16: 0\.\.15\)/,
    );
    expect(error?.message).not.toContain(redis.options.password as string);
  });
});
