// tier: slow (redis-server)
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { Redis, type RedisOptions } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { REDIS_INSTALL_HINT, startEmbeddedRedis, type EmbeddedRedis } from '../../src/queue/embedded-redis.js';
import { removeDir, tempDir } from './helpers/fixtures.js';

const root = tempDir('embedded');
const started: EmbeddedRedis[] = [];
afterAll(async () => {
  for (const r of started) await r.stop();
  removeDir(root);
});

async function start(dir: string): Promise<EmbeddedRedis> {
  const r = await startEmbeddedRedis({ dir });
  started.push(r);
  return r;
}

async function withClient<T>(options: RedisOptions, fn: (c: Redis) => Promise<T>): Promise<T> {
  const client = new Redis({
    ...options,
    lazyConnect: true,
    enableReadyCheck: false,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  client.on('error', () => undefined);
  try {
    await client.connect();
    return await fn(client);
  } finally {
    client.disconnect();
  }
}

describe('embedded redis-server', () => {
  it('listens on 127.0.0.1 with a private password, append-only on, files in its folder', async () => {
    const dir = join(root, 'a');
    const r = await start(dir);
    expect(r.options.host).toBe('127.0.0.1');
    expect(r.redacted).toMatch(/^redis:\/\/:\*\*\*@127\.0\.0\.1:\d+\/0$/);
    expect(await withClient(r.options, (c) => c.config('GET', 'appendonly'))).toEqual(['appendonly', 'yes']);
    await expect(withClient({ host: '127.0.0.1', port: r.port }, (c) => c.get('x'))).rejects.toThrow(/NOAUTH/);
    expect(statSync(join(dir, 'redis.pass')).mode & 0o777).toBe(0o600);
    expect(statSync(join(dir, 'redis.conf')).mode & 0o777).toBe(0o600);
    // The append-only files hold the whole queue: owner only, like redis.pass.
    await withClient(r.options, (c) => c.set('k', 'v'));
    const aof = readdirSync(dir).filter((n) => n.startsWith('appendonly'));
    expect(aof.length).toBeGreaterThan(0);
    for (const name of aof) {
      const path = join(dir, name);
      const entries = statSync(path).isDirectory() ? readdirSync(path).map((n) => join(path, n)) : [path];
      expect(entries.length).toBeGreaterThan(0);
      for (const file of entries) expect({ file, mode: statSync(file).mode & 0o077 }).toEqual({ file, mode: 0 });
    }
  });

  it('runs in its own process group, so a Ctrl-C to the foreground group does not stop it', async () => {
    const r = await start(join(root, 'pgid'));
    const pgid = Number(readFileSync(`/proc/${r.pid}/stat`, 'utf8').split(') ')[1]!.split(' ')[2]);
    expect(pgid).toBe(r.pid);
  });

  it('keeps data across a restart on the same folder, and reuses a server that is still running', async () => {
    const dir = join(root, 'b');
    const first = await start(dir);
    await withClient(first.options, (c) => c.set('canary', 'f007'));
    const again = await start(dir);
    expect(again.pid).toBe(first.pid);
    await first.stop();
    const second = await start(dir);
    expect(second.pid).not.toBe(first.pid);
    expect(second.options.password).toBe(first.options.password);
    expect(await withClient(second.options, (c) => c.get('canary'))).toBe('f007');
  });

  it('says how to install redis-server when it is missing', async () => {
    const saved = process.env.PATH;
    process.env.PATH = join(root, 'empty-bin');
    try {
      await expect(startEmbeddedRedis({ dir: join(root, 'c') })).rejects.toThrow(REDIS_INSTALL_HINT);
    } finally {
      process.env.PATH = saved;
    }
    expect(REDIS_INSTALL_HINT).toMatch(/apt-get install redis-server/);
  });
});
