import { describe, expect, it } from 'vitest';
import { UserInputError } from '../../src/errors.js';
import {
  parseRedisUrl,
  redisTargetFrom,
  requireRedisTarget,
  withSocketTimeout,
  workerSocketTimeoutMs,
} from '../../src/queue/connection.js';

describe('parseRedisUrl', () => {
  it('reads host, port, db, user and password from redis://', () => {
    const t = parseRedisUrl('redis://alice:s%3Acret@redis.internal:6380/2');
    expect(t.options).toMatchObject({
      host: 'redis.internal',
      port: 6380,
      db: 2,
      username: 'alice',
      password: 's:cret',
    });
    expect(t.options.tls).toBeUndefined();
    expect(t.redacted).toBe('redis://alice:***@redis.internal:6380/2');
    expect(t.redacted).not.toContain('cret');
  });

  it('defaults to port 6379 and db 0, and takes a password without a user', () => {
    const t = parseRedisUrl('redis://:pw@10.0.0.5');
    expect(t.options).toMatchObject({ host: '10.0.0.5', port: 6379, db: 0, password: 'pw' });
    expect(t.options.username).toBeUndefined();
  });

  it('turns on TLS with the host as servername for rediss://', () => {
    const t = parseRedisUrl('rediss://:pw@cache.example.com:6390');
    expect(t.options.tls).toEqual({ servername: 'cache.example.com' });
    expect(t.options.port).toBe(6390);
  });

  it('reads a CA bundle for rediss:// from CANARY_AUDIT_REDIS_CA, and names an unreadable one', () => {
    const previous = process.env.CANARY_AUDIT_REDIS_CA;
    try {
      process.env.CANARY_AUDIT_REDIS_CA = new URL(import.meta.url).pathname;
      const t = parseRedisUrl('rediss://cache:6379');
      expect(Buffer.isBuffer((t.options.tls as { ca?: Buffer }).ca)).toBe(true);
      process.env.CANARY_AUDIT_REDIS_CA = '/nonexistent/ca.pem';
      expect(() => parseRedisUrl('rediss://cache:6379')).toThrow(
        /CANARY_AUDIT_REDIS_CA="\/nonexistent\/ca.pem" cannot be read: .*; point it at a readable PEM file .* or unset it/,
      );
    } finally {
      if (previous === undefined) delete process.env.CANARY_AUDIT_REDIS_CA;
      else process.env.CANARY_AUDIT_REDIS_CA = previous;
    }
  });

  it('strips IPv6 brackets', () => {
    expect(parseRedisUrl('redis://[::1]:7000').options).toMatchObject({ host: '::1', port: 7000 });
  });

  it('accepts unix sockets with db and password in the query', () => {
    const t = parseRedisUrl('unix:///var/run/redis/redis.sock?db=3&password=pw');
    expect(t.options).toMatchObject({ path: '/var/run/redis/redis.sock', db: 3, password: 'pw' });
    expect(t.redacted).toContain('password=***');
    expect(t.redacted).not.toContain('=pw');
  });

  it.each([
    ['localhost:6379', /has no scheme; write redis:\/\/localhost:6379/],
    ['not a url', /not a URL/],
    ['http://localhost:6379', /scheme "http" .* not supported/],
    ['redis://localhost/abc', /database "abc"/],
    ['unix://', /names no socket path/],
    // A port out of range is named as the port, not blamed on the password's encoding.
    [
      'redis://127.0.0.1:99999',
      /^REDIS_URL: port "99999" in "redis:\/\/127\.0\.0\.1:99999" is not a port; a port is a number from 1 to 65535/,
    ],
    ['redis://:pw@[::1]:70000/0', /port "70000" in "redis:\/\/:\*\*\*@\[::1\]:70000\/0" is not a port/],
  ])('rejects %s in one line naming the source', (url, pattern) => {
    let error: unknown;
    try {
      parseRedisUrl(url, 'REDIS_URL');
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(UserInputError);
    expect((error as Error).message).toMatch(pattern);
    expect((error as Error).message).toMatch(/^REDIS_URL: /);
    expect((error as Error).message).not.toContain('\n');
  });

  it('still says how to write a password when the URL is broken by one, not by its port', () => {
    expect(() => parseRedisUrl('redis://:a/b@host:6379')).toThrow(
      /is not a URL \(a password with \/, # or \? must be percent-encoded/,
    );
  });

  it('never echoes a password in an error', () => {
    expect(() => parseRedisUrl('redis://:topsecret@host/x1')).toThrow(/\*\*\*/);
    try {
      parseRedisUrl('redis://:topsecret@host/x1');
    } catch (e) {
      expect((e as Error).message).not.toContain('topsecret');
    }
  });
});

describe('redisTargetFrom', () => {
  it('prefers the flag, then REDIS_URL, else undefined; requireRedisTarget explains how to give one', () => {
    const previous = process.env.REDIS_URL;
    try {
      process.env.REDIS_URL = 'redis://env-host:1234';
      expect(redisTargetFrom('redis://flag-host')?.options.host).toBe('flag-host');
      expect(redisTargetFrom(undefined)?.options.host).toBe('env-host');
      delete process.env.REDIS_URL;
      expect(redisTargetFrom(undefined)).toBeUndefined();
      expect(() => requireRedisTarget(undefined, 'status')).toThrow(
        /set REDIS_URL or pass --redis .*canary-audit status --help/,
      );
    } finally {
      if (previous === undefined) delete process.env.REDIS_URL;
      else process.env.REDIS_URL = previous;
    }
  });
});

describe('workerSocketTimeoutMs', () => {
  it("outlasts BullMQ's longest block (drainDelay, or 10 s for a delayed job) plus its 1 s watchdog", () => {
    for (const drainS of [1, 5, 10, 30]) {
      expect(workerSocketTimeoutMs(drainS)).toBeGreaterThan(Math.max(drainS, 10) * 1000 + 1000);
    }
    expect(workerSocketTimeoutMs(5)).toBe(15_000);
    expect(workerSocketTimeoutMs(30)).toBe(35_000);
  });

  it('withSocketTimeout sets it on a copy and keeps the rest of the options', () => {
    const conn = { options: { host: 'r', port: 6380, db: 2 }, redacted: 'redis://r:6380/2' };
    const timed = withSocketTimeout(conn, 15_000);
    expect(timed.options).toEqual({ host: 'r', port: 6380, db: 2, socketTimeout: 15_000 });
    expect(timed.redacted).toBe(conn.redacted);
    expect(conn.options).not.toHaveProperty('socketTimeout');
  });
});
