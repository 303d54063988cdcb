import { describe, expect, it } from 'vitest';
import { redisHintArgs, withoutPassword } from '../../src/cli/redis-hint.js';
import { maskRedisUrl, parseRedisUrl } from '../../src/queue/index.js';

describe('follow-up commands name Redis so that they work as printed', () => {
  it('takes the masked password out of the URL', () => {
    for (const [url, bare] of [
      ['redis://:s3cret@127.0.0.1:6390/0', 'redis://127.0.0.1:6390/0'],
      ['rediss://alice:s3cret@redis.lab:6380', 'rediss://alice@redis.lab:6380'],
      ['redis://s3cret@host:1', 'redis://host:1'],
      ['redis://host:1/2?password=s3cret', 'redis://host:1/2'],
      ['redis://host:1/2?password=s3cret&db=3', 'redis://host:1/2?db=3'],
    ] as const) {
      const masked = maskRedisUrl(url);
      expect(masked).toContain('***');
      expect(withoutPassword(masked), url).toBe(bare);
    }
  });

  it('never prints *** nor the password: the flag or file it came from instead', () => {
    const env = {};
    const withPassword = parseRedisUrl('redis://:s3cret@127.0.0.1:6390/0');
    for (const hint of [redisHintArgs(withPassword, undefined, env), redisHintArgs(withPassword, '/run/pw', env)]) {
      expect(hint).not.toContain('***');
      expect(hint).not.toContain('s3cret');
    }
    expect(redisHintArgs(withPassword, '/run/pw', env)).toBe(
      ' --redis redis://127.0.0.1:6390/0 --redis-password-file /run/pw',
    );
    expect(redisHintArgs(parseRedisUrl('redis://127.0.0.1:6390'), undefined, env)).toBe(
      ' --redis redis://127.0.0.1:6390',
    );
    // $REDIS_URL finds the same Redis again; no Redis, no flag.
    expect(redisHintArgs(withPassword, undefined, { REDIS_URL: 'redis://x' })).toBe('');
    expect(redisHintArgs(undefined, undefined, env)).toBe('');
  });
});
