import { chmodSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  assertRedisReachable,
  maskRedisUrl,
  parseRedisUrl,
  redisTargetFrom,
  requireRedisTarget,
} from '../../src/queue/connection.js';
import { runMain } from './helpers/main.js';
import { removeDir, tempDir } from './helpers/fixtures.js';

/**
 * A Redis password is never printed: every message that quotes a Redis URL masks it first, on the
 * text, so URLs that do not parse (generated passwords often hold `/`, `#` or `?`) are masked too.
 */
const root = tempDir('redis-secrets');
afterAll(() => removeDir(root));

// [url, fragments of the password that must not appear]
const HOSTILE: [string, string[]][] = [
  ['redis://:ab/cdpw@127.0.0.1:6379', ['ab/cd', 'cdpw']],
  ['redis://:se#cret@127.0.0.1:6379', ['se#cret', 'cret']],
  ['redis://alice:sec?ret@127.0.0.1:6379', ['sec?ret', 'ret@']],
  ['redis://:12#topsecret@127.0.0.1', ['topsecret', '12#']],
  ['redis://:topsecret@127.0.0.1:99999', ['topsecret']],
  ['redis://:topsecret@127.0.0.1:abc', ['topsecret']],
  ['redis://:topsecret@/0', ['topsecret']],
  ['redis://:topsecret@host/x1', ['topsecret']],
  ['ftp://:topsecret@host', ['topsecret']],
  ['redis://:top/se@cret@host:6379/0', ['top/se', 'se@cret']],
  ['unix:///tmp/r.sock?password=topsecret&db=x', ['topsecret']],
  ['unix://:topsecret@', ['topsecret']],
];

function messageOf(fn: () => unknown): string {
  try {
    fn();
  } catch (error) {
    return (error as Error).message;
  }
  throw new Error('expected an error');
}

describe('Redis URLs in messages', () => {
  it('maskRedisUrl keeps scheme, user and host, and masks everything between // and the last @', () => {
    expect(maskRedisUrl('redis://alice:p/w#x@h:6379/2')).toBe('redis://alice:***@h:6379/2');
    expect(maskRedisUrl('redis://:p@h')).toBe('redis://:***@h');
    expect(maskRedisUrl('redis://justpassword@h')).toBe('redis://***@h');
    expect(maskRedisUrl('redis://h:6379/0')).toBe('redis://h:6379/0');
    expect(maskRedisUrl('unix:///s.sock?db=1&password=p')).toBe('unix:///s.sock?db=1&password=***');
  });

  it.each(HOSTILE)('parse error for %s names the source and not the password', (url, secrets) => {
    for (const source of ['--redis', 'REDIS_URL']) {
      const message = messageOf(() => parseRedisUrl(url, source));
      expect(message.startsWith(`${source}: `)).toBe(true);
      expect(message).not.toContain('\n');
      for (const s of secrets) expect(message).not.toContain(s);
      expect(message).toContain('***');
    }
  });

  it('a URL that parses keeps its password out of `redacted` (status, worker and dashboard print it)', () => {
    const t = parseRedisUrl('redis://:se%23cr%2Fet@127.0.0.1:6390/1');
    expect(t.options.password).toBe('se#cr/et');
    expect(t.redacted).toBe('redis://:***@127.0.0.1:6390/1');
  });

  it('an unreachable Redis is named without its password', async () => {
    const target = parseRedisUrl('redis://:top%2Fsecret@127.0.0.1:1/0');
    const error = await assertRedisReachable(target, 1_000).catch((e: Error) => e);
    expect((error as Error).message).toMatch(/^cannot reach Redis at redis:\/\/:\*\*\*@127\.0\.0\.1:1\/0: /);
    expect((error as Error).message).not.toContain('secret');
  });

  it.each(['status', 'submit', 'dashboard', 'cancel', 'worker'])(
    '`%s` with a bad --redis or REDIS_URL exits 2 without the password',
    async (command) => {
      const args =
        command === 'submit'
          ? [command, 'grid.yaml']
          : command === 'cancel'
            ? [command, 'audit-000000000000']
            : [command];
      const flag = await runMain([...args, '--redis', 'redis://:ab/cdpw@127.0.0.1:6379', '--artifacts', root], {
        REDIS_URL: undefined,
      });
      const env = await runMain([...args, '--artifacts', root], { REDIS_URL: 'redis://:se#cret@127.0.0.1:99999' });
      for (const [r, secret] of [
        [flag, 'cdpw'],
        [env, 'cret'],
      ] as const) {
        expect(r.code).toBe(2);
        expect(r.stderr + r.stdout).not.toContain(secret);
        expect(r.stderr).toContain('***');
      }
    },
  );
});

describe('the password from a file or the environment', () => {
  it('--redis-password-file (first line) or $REDIS_PASSWORD fill in a URL without a password', () => {
    const file = join(root, 'redis.pass');
    writeFileSync(file, 'fr/om#file\n');
    chmodSync(file, 0o600);
    const saved = process.env.REDIS_PASSWORD;
    try {
      process.env.REDIS_PASSWORD = 'from-env';
      expect(redisTargetFrom('redis://127.0.0.1:6379', file)?.options.password).toBe('fr/om#file');
      expect(redisTargetFrom('redis://127.0.0.1:6379')?.options.password).toBe('from-env');
      // the URL's own password wins over the environment; a file and a URL password conflict
      expect(redisTargetFrom('redis://:inurl@127.0.0.1:6379')?.options.password).toBe('inurl');
      expect(messageOf(() => redisTargetFrom('redis://:inurl@127.0.0.1:6379', file))).toMatch(
        /has a password and --redis-password-file gives another/,
      );
      expect(messageOf(() => redisTargetFrom('redis://:inurl@127.0.0.1:6379', file))).not.toContain('inurl');
      expect(redisTargetFrom('redis://127.0.0.1:6379', file)?.redacted).toBe('redis://127.0.0.1:6379');
      expect(messageOf(() => requireRedisTarget('redis://h', 'status', join(root, 'missing')))).toMatch(
        /--redis-password-file "[^"]*missing" cannot be read: ENOENT/,
      );
    } finally {
      if (saved === undefined) delete process.env.REDIS_PASSWORD;
      else process.env.REDIS_PASSWORD = saved;
    }
  });

  it.each(['worker', 'status', 'submit', 'dashboard'])(
    '`%s --help` says a --redis URL shows in ps and offers the file and the environment',
    async (command) => {
      const help = (await runMain([command, '--help'])).stdout.replace(/\s+/g, ' ');
      expect(help).toContain('--redis-password-file');
      expect(help).toContain('$REDIS_PASSWORD');
      expect(help).toMatch(/shows in `ps`/);
    },
  );
});
