import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { accessSync, constants, existsSync, readFileSync } from 'node:fs';
import { chmod, mkdir, readFile, readdir, rm, stat } from 'node:fs/promises';
import { createServer } from 'node:net';
import { delimiter, join } from 'node:path';
import { CanaryAuditError } from '../errors.js';
import { writeFileAtomic } from '../fs/atomic.js';
import { parseRedisUrl, type RedisTarget } from './connection.js';
import { sleep } from '../sleep.js';
import { pidAlive } from '../pid.js';

/**
 * A private redis-server for one machine (`canary-audit run`): append-only file on, data in the
 * audit's folder, listening on 127.0.0.1 only, with a random password kept in that folder (0600) so
 * other local users cannot touch the queue. Restarting on the same folder reuses the password and
 * the append-only file, so a restart loses no job.
 */
export interface EmbeddedRedis extends RedisTarget {
  url: string;
  port: number;
  pid: number;
  dir: string;
  /** Stop the server (it fsyncs the append-only file first) and wait for it to exit. */
  stop(): Promise<void>;
}

export interface EmbeddedRedisOptions {
  /** Data folder: redis.conf, the append-only files, redis.log, redis.pid, redis.pass. */
  dir: string;
  /** TCP port on 127.0.0.1; default: a free one (or the one a previous start in `dir` used). */
  port?: number;
  /** redis-server executable; default: found on PATH. */
  executable?: string;
  /** ms to wait for "ready"; default 15000. */
  readyTimeoutMs?: number;
}

export const REDIS_INSTALL_HINT =
  'redis-server not found on PATH; install it with `apt-get install redis-server` (or run `bash .ci/setup`), or set REDIS_URL to a running Redis';

/** Find an executable on PATH, or null. */
export function findOnPath(name: string, path: string = process.env.PATH ?? ''): string | null {
  for (const dir of path.split(delimiter)) {
    if (!dir) continue;
    const candidate = join(dir, name);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return null;
}

/** A TCP port that was free a moment ago on `host` (the OS picks it). */
export async function freePort(host = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, host, () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

export async function startEmbeddedRedis(options: EmbeddedRedisOptions): Promise<EmbeddedRedis> {
  const executable = options.executable ?? findOnPath('redis-server');
  if (!executable) throw new CanaryAuditError('E_NO_REDIS_SERVER', REDIS_INSTALL_HINT);
  const dir = options.dir;
  await mkdir(dir, { recursive: true });
  const password = await stablePassword(dir);

  const previous = await liveServerIn(dir, password);
  if (previous) return previous;

  // The port the OS offered may be taken before redis binds it: try a few.
  let lastError: unknown;
  for (let attempt = 0; attempt < 3; attempt += 1) {
    const port = options.port ?? (await freePort());
    try {
      return await launch(executable, dir, port, password, options.readyTimeoutMs ?? 15_000);
    } catch (error) {
      lastError = error;
      if (options.port !== undefined || !/in use|bind/i.test((error as Error).message)) break;
    }
  }
  throw lastError;
}

async function stablePassword(dir: string): Promise<string> {
  const file = join(dir, 'redis.pass');
  if (existsSync(file)) return (await readFile(file, 'utf8')).trim();
  const password = randomBytes(18).toString('hex');
  await writeFileAtomic(file, `${password}\n`, { mode: 0o600 });
  return password;
}

function configText(dir: string, port: number, password: string): string {
  // Quoted values: the audit folder may contain spaces.
  const q = (s: string) => `"${s.replaceAll('\\', '\\\\').replaceAll('"', '\\"')}"`;
  return [
    `port ${port}`,
    'bind 127.0.0.1',
    'protected-mode yes',
    `dir ${q(dir)}`,
    'daemonize no',
    `pidfile ${q(join(dir, 'redis.pid'))}`,
    `logfile ${q(join(dir, 'redis.log'))}`,
    'appendonly yes',
    'appendfsync everysec',
    // The append-only file is the only persistence: no RDB snapshots that fork a copy of the data.
    'save ""',
    `requirepass ${q(password)}`,
    // BullMQ needs keys to survive memory pressure.
    'maxmemory-policy noeviction',
    '',
  ].join('\n');
}

/**
 * The private Redis an audit folder's `redis/` holds (`canary-audit run` writes it): its target from
 * redis.conf's port and redis.pass, whether or not it is running; null when the folder has none.
 */
export function privateRedisTarget(redisDir: string): RedisTarget | null {
  const conf = join(redisDir, 'redis.conf');
  const pass = join(redisDir, 'redis.pass');
  if (!existsSync(conf) || !existsSync(pass)) return null;
  const port = /^port (\d+)$/m.exec(readFileSync(conf, 'utf8'))?.[1];
  if (port === undefined) return null;
  return parseRedisUrl(urlFor(Number(port), readFileSync(pass, 'utf8').trim()), "the audit's private Redis");
}

/** Files an earlier server (or an older canary-audit) left readable by others: owner only. */
async function privateAppendOnlyFiles(dir: string): Promise<void> {
  for (const name of await readdir(dir).catch(() => [] as string[])) {
    if (!/^appendonly/.test(name)) continue;
    const path = join(dir, name);
    const isDir = (await stat(path)).isDirectory();
    await chmod(path, isDir ? 0o700 : 0o600);
    if (isDir) for (const inner of await readdir(path)) await chmod(join(path, inner), 0o600);
  }
}

function urlFor(port: number, password: string): string {
  return `redis://:${password}@127.0.0.1:${port}/0`;
}

async function launch(
  executable: string,
  dir: string,
  port: number,
  password: string,
  readyTimeoutMs: number,
): Promise<EmbeddedRedis> {
  const conf = join(dir, 'redis.conf');
  await writeFileAtomic(conf, configText(dir, port, password), { mode: 0o600 });
  await rm(join(dir, 'redis.pid'), { force: true });
  // Its own process group: a terminal's Ctrl-C reaches every process of the foreground group, and a
  // Redis that died with it would leave `run` unable to put its runs back in the queue and exit.
  // `run` stops it itself (SIGTERM, append-only file fsynced) once the workers are closed.
  // umask 077: the append-only files (the whole queue, job data included) are 0600 like redis.pass;
  // Node cannot set a child's umask, so a shell sets it and execs the server (same pid).
  await privateAppendOnlyFiles(dir);
  const child = spawn('/bin/sh', ['-c', 'umask 077 && exec "$0" "$@"', executable, conf], {
    stdio: ['ignore', 'ignore', 'pipe'],
    detached: true,
  });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const url = urlFor(port, password);
  const target = parseRedisUrl(url, 'embedded redis');
  const ready = await waitReady(target, readyTimeoutMs, exited);
  if (!ready) {
    child.kill('SIGKILL');
    const logTail = tail(join(dir, 'redis.log')) || stderr.trim();
    throw new CanaryAuditError(
      'E_REDIS_START',
      `redis-server did not start on 127.0.0.1:${port}: ${logTail || 'no log output'}`,
    );
  }
  return handle(target, url, port, child.pid ?? -1, dir, child, exited);
}

function handle(
  target: RedisTarget,
  url: string,
  port: number,
  pid: number,
  dir: string,
  child: ChildProcess | null,
  exited: Promise<unknown> | null,
): EmbeddedRedis {
  let stopping: Promise<void> | undefined;
  return {
    ...target,
    url,
    port,
    pid,
    dir,
    stop() {
      stopping ??= (async () => {
        // SIGTERM makes redis fsync the append-only file and exit cleanly.
        try {
          process.kill(pid, 'SIGTERM');
        } catch {
          return;
        }
        if (exited) {
          const timer = setTimeout(() => child?.kill('SIGKILL'), 20_000);
          await exited;
          clearTimeout(timer);
        } else {
          await waitGone(pid, 20_000);
        }
      })();
      return stopping;
    },
  };
}

/**
 * A server that an earlier `run` on this folder left running (that process was killed): reuse it
 * rather than start a second server writing the same append-only file.
 */
async function liveServerIn(dir: string, password: string): Promise<EmbeddedRedis | null> {
  const pidFile = join(dir, 'redis.pid');
  const confFile = join(dir, 'redis.conf');
  if (!existsSync(pidFile) || !existsSync(confFile)) return null;
  const pid = Number(readFileSync(pidFile, 'utf8').trim());
  if (!Number.isInteger(pid) || pid <= 0 || !isRedisProcess(pid)) return null;
  const port = Number(/^port (\d+)$/m.exec(readFileSync(confFile, 'utf8'))?.[1]);
  if (!Number.isInteger(port)) return null;
  const url = urlFor(port, password);
  const target = parseRedisUrl(url, 'embedded redis');
  if (!(await waitReady(target, 2_000, null))) return null;
  return handle(target, url, port, pid, dir, null, null);
}

function isRedisProcess(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('redis-server');
  } catch {
    return false;
  }
}

async function waitGone(pid: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (!pidAlive(pid)) return;
    await sleep(50);
  }
}

async function waitReady(target: RedisTarget, timeoutMs: number, exited: Promise<unknown> | null): Promise<boolean> {
  const { Redis } = await import('ioredis');
  let dead = false;
  void exited?.then(() => {
    dead = true;
  });
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline && !dead) {
    const client = new Redis({
      ...target.options,
      lazyConnect: true,
      connectTimeout: 1_000,
      maxRetriesPerRequest: 0,
      enableOfflineQueue: false,
      retryStrategy: () => null,
    });
    client.on('error', () => undefined);
    try {
      await client.connect();
      // While loading the append-only file redis answers LOADING: not ready yet.
      if ((await client.ping()) === 'PONG') return true;
    } catch {
      // not up yet
    } finally {
      client.disconnect();
    }
    await sleep(50);
  }
  return false;
}

function tail(file: string, lines = 3): string {
  try {
    return readFileSync(file, 'utf8').trim().split('\n').slice(-lines).join(' | ');
  } catch {
    return '';
  }
}
