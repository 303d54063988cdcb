import { readFileSync } from 'node:fs';
import type { RedisOptions } from 'ioredis';
import { CanaryAuditError, UserInputError, quoteValue } from '../errors.js';

/**
 * Redis connection settings from a URL (`--redis URL` or $REDIS_URL):
 *   redis://[user[:password]@]host[:port][/db]     plain TCP (default port 6379, db 0)
 *   rediss://...                                   TLS; CA bundle from $CANARY_AUDIT_REDIS_CA (PEM)
 *   unix:///path/to/redis.sock[?db=N&password=P]   a local socket
 * The password never appears in logs: `redacted` replaces it with `***`.
 */
export interface RedisTarget {
  options: RedisOptions;
  /** The URL with any password replaced by ***: safe for logs and errors. */
  redacted: string;
  /** Where the URL came from (`--redis`, `REDIS_URL`), for messages. */
  source?: string;
}

const DEFAULT_PORT = 6379;

/**
 * `raw` with any password replaced by ***, for quoting in messages: done on the text, before and
 * without parsing, so a URL that does not parse (a `/`, `#` or `?` in the password, a bad port) is
 * masked too. Everything between `//` and the last `@` is credentials: only a user name without
 * special characters is kept. A `password=` query parameter is masked as well.
 */
export function maskRedisUrl(raw: string): string {
  let text = raw.replace(/([?&;]password=)[^&#]*/gi, '$1***');
  const start = text.indexOf('//');
  const at = text.lastIndexOf('@');
  if (at > start) {
    const from = start === -1 ? 0 : start + 2;
    const userinfo = text.slice(from, at);
    const colon = userinfo.indexOf(':');
    const user = colon === -1 ? userinfo : userinfo.slice(0, colon);
    // No colon: a single userinfo part is the password for Redis's `AUTH password` form too.
    const keep = colon !== -1 && /^[\w.%-]*$/.test(user) ? `${user}:***` : '***';
    text = `${text.slice(0, from)}${keep}${text.slice(at)}`;
  }
  return text;
}

export function parseRedisUrl(raw: string, source = '--redis'): RedisTarget {
  if (/^[\w.-]+:\d+$/.test(raw)) {
    // host:port parses as a URL whose scheme is the host name: say what was meant.
    throw new UserInputError(`${source}: ${quoteValue(raw)} has no scheme; write redis://${raw}`, {
      code: 'E_BAD_REDIS_URL',
    });
  }
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    // A port out of range makes the URL unparsable too: name it rather than the password.
    const port = /^[a-z][a-z0-9+.-]*:\/\/(?:[^@/?#]*@)?(?:\[[^\]/]*\]|[^:/?#@]*):([^/?#]*)(?:[/?#]|$)/i.exec(raw)?.[1];
    // Digits only: `redis://:a/b@host` also parses here with "a" as a port, and that is the password's fault.
    if (port !== undefined && /^\d+$/.test(port) && Number(port) > 65535) {
      throw new UserInputError(
        `${source}: port ${quoteValue(port)} in ${quoteValue(maskRedisUrl(raw))} is not a port; a port is a number from 1 to 65535 (Redis listens on 6379 by default)`,
        { code: 'E_BAD_REDIS_URL' },
      );
    }
    throw new UserInputError(
      `${source}: ${quoteValue(maskRedisUrl(raw))} is not a URL (a password with /, # or ? must be percent-encoded, or given by --redis-password-file or $REDIS_PASSWORD); use redis://[user:password@]host[:port][/db], rediss://... (TLS) or unix:///path.sock`,
      { code: 'E_BAD_REDIS_URL' },
    );
  }
  const protocol = url.protocol.replace(/:$/, '');
  const username = url.username ? decodeURIComponent(url.username) : undefined;
  const password = url.password ? decodeURIComponent(url.password) : (url.searchParams.get('password') ?? undefined);
  const redacted = maskRedisUrl(raw);
  const options: RedisOptions = {};
  const found = (): RedisTarget => ({ options, redacted, source });
  if (username) options.username = username;
  if (password) options.password = password;

  if (protocol === 'unix' || protocol === 'redis+unix') {
    if (!url.pathname || url.pathname === '/') {
      throw new UserInputError(
        `${source}: ${quoteValue(redacted)} names no socket path; use unix:///path/to/redis.sock`,
        {
          code: 'E_BAD_REDIS_URL',
        },
      );
    }
    options.path = decodeURIComponent(url.pathname);
    options.db = parseDb(url.searchParams.get('db') ?? '0', redacted, source);
    return found();
  }
  if (protocol !== 'redis' && protocol !== 'rediss') {
    throw new UserInputError(
      `${source}: scheme ${quoteValue(protocol)} in ${quoteValue(redacted)} is not supported; use redis://, rediss:// (TLS) or unix://`,
      { code: 'E_BAD_REDIS_URL' },
    );
  }
  if (!url.hostname) {
    throw new UserInputError(`${source}: ${quoteValue(redacted)} names no host; e.g. redis://127.0.0.1:6379`, {
      code: 'E_BAD_REDIS_URL',
    });
  }
  // WHATWG URL keeps IPv6 brackets in hostname; ioredis wants the bare address.
  options.host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  options.port = url.port ? Number(url.port) : DEFAULT_PORT;
  const dbText = url.pathname.replace(/^\//, '') || url.searchParams.get('db') || '0';
  options.db = parseDb(dbText, redacted, source);
  if (protocol === 'rediss') {
    const caPath = process.env.CANARY_AUDIT_REDIS_CA;
    let ca: Buffer | undefined;
    if (caPath) {
      try {
        ca = readFileSync(caPath);
      } catch (error) {
        throw new CanaryAuditError(
          'E_REDIS_CA',
          `CANARY_AUDIT_REDIS_CA=${quoteValue(caPath)} cannot be read: ${(error as Error).message}; point it at a readable PEM file of the CA that signed the Redis server's certificate, or unset it to use the system's CAs`,
          {
            exitCode: 2,
            cause: error,
          },
        );
      }
    }
    // servername makes SNI and certificate host checks use the name the user typed.
    options.tls = { servername: options.host, ...(ca ? { ca } : {}) };
  }
  return found();
}

function parseDb(text: string, redacted: string, source: string): number {
  const db = Number(text);
  if (!Number.isInteger(db) || db < 0) {
    throw new UserInputError(
      `${source}: database ${quoteValue(text)} in ${quoteValue(redacted)} must be an integer >= 0`,
      {
        code: 'E_BAD_REDIS_URL',
      },
    );
  }
  return db;
}

/**
 * Where the queue lives: an explicit --redis value, else $REDIS_URL, else undefined (the caller
 * decides: `run` starts a private redis-server, the other commands refuse).
 * The password, when not in the URL, comes from `passwordFile` (--redis-password-file: the first
 * line of the file), else $REDIS_PASSWORD: neither shows in `ps`, unlike a URL on the command line.
 */
export function redisTargetFrom(flag: string | undefined, passwordFile?: string): RedisTarget | undefined {
  let target: RedisTarget | undefined;
  if (flag !== undefined) target = parseRedisUrl(flag, '--redis');
  else {
    const env = process.env.REDIS_URL;
    if (env !== undefined && env !== '') target = parseRedisUrl(env, 'REDIS_URL');
  }
  if (target === undefined) {
    if (passwordFile !== undefined) {
      throw new UserInputError('--redis-password-file needs a Redis: set REDIS_URL or pass --redis redis://host:6379', {
        code: 'E_NO_REDIS',
      });
    }
    return undefined;
  }
  const password = passwordFrom(passwordFile);
  if (password === undefined) return target;
  if (target.options.password !== undefined && passwordFile !== undefined) {
    throw new UserInputError(
      `${target.source}: ${quoteValue(target.redacted)} has a password and --redis-password-file gives another; keep one`,
      {
        code: 'E_BAD_REDIS_URL',
      },
    );
  }
  return target.options.password !== undefined ? target : { ...target, options: { ...target.options, password } };
}

function passwordFrom(file: string | undefined): string | undefined {
  if (file !== undefined) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (error) {
      throw new UserInputError(
        `--redis-password-file ${quoteValue(file)} cannot be read: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}; give a readable file holding the password`,
        {
          code: 'E_BAD_REDIS_URL',
          cause: error,
        },
      );
    }
    const password = text.split(/\r?\n/)[0] ?? '';
    if (password === '')
      throw new UserInputError(
        `--redis-password-file ${quoteValue(file)}: the first line is empty; write the password there`,
        { code: 'E_BAD_REDIS_URL' },
      );
    return password;
  }
  const env = process.env.REDIS_PASSWORD;
  return env !== undefined && env !== '' ? env : undefined;
}

/** Like redisTargetFrom, but a missing URL is a user error that says how to give one. */
/**
 * The warning for a password inside `--redis` (null when none): the flag is in the process's
 * argv, which every local user reads with `ps` for as long as the process runs (a worker: days),
 * and shell history keeps it. The password itself is never printed.
 */
export function passwordInFlagWarning(flag: string | undefined, command: string): string | null {
  if (flag === undefined) return null;
  let password: string | undefined;
  try {
    password = parseRedisUrl(flag).options.password;
  } catch {
    return null;
  }
  if (password === undefined) return null;
  return `canary-audit ${command}: warning: the Redis password is in --redis, so every user of this host can read it with \`ps\` while the ${command} runs (and shell history keeps it); leave it out of the URL and give it by --redis-password-file FILE (mode 0600) or $REDIS_PASSWORD`;
}

export function requireRedisTarget(flag: string | undefined, command: string, passwordFile?: string): RedisTarget {
  const target = redisTargetFrom(flag, passwordFile);
  if (!target) {
    throw new UserInputError(
      `no Redis given: set REDIS_URL or pass --redis redis://host:6379 (or use \`canary-audit run\`, which starts its own); see \`canary-audit ${command} --help\``,
      { code: 'E_NO_REDIS' },
    );
  }
  return target;
}

/**
 * Fail fast, in one line, when Redis cannot be reached. BullMQ's own connections retry forever
 * (right for a long-lived worker across a Redis restart, wrong for `status` or `submit`).
 */
export async function assertRedisReachable(target: RedisTarget, timeoutMs = 5_000): Promise<void> {
  const { Redis } = await import('ioredis');
  const client = new Redis({
    ...target.options,
    lazyConnect: true,
    connectTimeout: timeoutMs,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    retryStrategy: () => null,
  });
  // ioredis reports the socket's own error (ECONNREFUSED, ...) as an event, then a generic one.
  let socketError: Error | undefined;
  client.on('error', (error: Error) => {
    socketError ??= error;
  });
  try {
    await client.connect();
    await client.ping();
    await checkDatabase(client, target);
  } catch (error) {
    if (error instanceof CanaryAuditError) throw error;
    const reason = (socketError ?? (error as Error)).message;
    throw new CanaryAuditError(
      'E_REDIS_UNREACHABLE',
      `cannot reach Redis at ${target.redacted}: ${reason}; check REDIS_URL/--redis (host, port, password, TLS)`,
      { cause: error },
    );
  } finally {
    client.disconnect();
  }
}

/**
 * ioredis ignores a failed SELECT on connect and stays on db 0: ask for the database explicitly,
 * so a number beyond the server's `databases` setting fails instead of mixing queues in db 0.
 */
async function checkDatabase(client: import('ioredis').Redis, target: RedisTarget): Promise<void> {
  const db = target.options.db ?? 0;
  if (db === 0) return;
  try {
    await client.select(db);
  } catch (error) {
    const count = await client.config('GET', 'databases').then(
      (r) => Number((r as string[])[1]),
      () => NaN,
    );
    const range = Number.isInteger(count) ? ` (it has ${count}: 0..${count - 1})` : '';
    throw new UserInputError(
      `${target.source ?? '--redis'}: database ${db} does not exist on ${target.redacted}${range}; use a smaller number or raise \`databases\` in redis.conf (${(error as Error).message})`,
      { code: 'E_BAD_REDIS_URL', cause: error },
    );
  }
}

/** BullMQ's longest blocking fetch when a delayed job is due later (its `maximumBlockTimeout`), in s. */
const BULLMQ_MAX_BLOCK_S = 10;
/** Margin over the longest block: BullMQ's own watchdog (block + 1 s) and a slow reply from a loaded Redis. */
const SOCKET_TIMEOUT_MARGIN_S = 5;

/**
 * How long a worker's connection may wait for any reply before ioredis destroys its socket and
 * reconnects with a fresh one (ioredis `socketTimeout`). Without it a connection that was cut while
 * a command was in flight stays ESTABLISHED in the kernel's TCP retransmission backoff after the
 * network heals (up to the 120 s RTO cap), and a worker slot waiting on it takes no run. It must
 * outlast a legitimate block: BullMQ's idle fetch (BZPOPMIN) blocks for `drainDelayS`, or up to
 * 10 s when a delayed job is due, on connections made from the same options.
 */
export function workerSocketTimeoutMs(drainDelayS: number): number {
  return (Math.max(drainDelayS, BULLMQ_MAX_BLOCK_S) + SOCKET_TIMEOUT_MARGIN_S) * 1000;
}

/** The same connection with ioredis's `socketTimeout` (ms) on every client made from its options. */
export function withSocketTimeout<T extends { options: RedisOptions }>(conn: T, socketTimeoutMs: number): T {
  return { ...conn, options: { ...conn.options, socketTimeout: socketTimeoutMs } };
}
