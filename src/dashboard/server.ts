import { randomBytes, timingSafeEqual } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { serve, type ServerType } from '@hono/node-server';
import { Hono, type Context } from 'hono';
import { streamSSE } from 'hono/streaming';
import { CanaryAuditError } from '../errors.js';
import { openInside, readInside, ReadBoundaryError } from '../fs/read-boundary.js';
import { log } from '../log.js';
import { PACKAGE_ROOT } from '../paths.js';
import { cancelAudit, type QueueConnection } from '../queue/index.js';
import { checkTreeInsideArtifacts, resolveInsideArtifacts, toArtifactRelative } from '../fs/index.js';
import { computeReport } from '../report/index.js';
import { buildPlots } from '../report/plots.js';
import { StatusSource, type Snapshot } from './source.js';
import { auditIndexPath, outputDirOfManifest } from '../layout.js';

/**
 * `canary-audit dashboard`: a read-only web page over the queue, served by the controller.
 * Safe by default: bound to 127.0.0.1, requests for another Host refused on any bind address (DNS
 * rebinding; names beyond loopback only through `allowHosts`), files read only inside the artifact
 * root (the worker's own boundary check, symlinks followed), no
 * inline script (CSP), every user string set as text by the page. Actions (cancel an audit, retry a
 * failed run) exist only with `allowActions`, and then need the token in an X-Canary-Token header
 * (which a cross-site form cannot send) plus a same-origin Origin.
 */
export interface DashboardOptions {
  conn: QueueConnection;
  /** Artifact root: trainer logs and the exposure-vs-dose plot are read from it when present. */
  artifactsDir: string | null;
  host?: string;
  /** Host names (or addresses) a request may name besides loopback: how users reach a non-loopback bind. */
  allowHosts?: string[];
  port?: number;
  allowActions?: boolean;
  /** Token for actions; random when not given. */
  token?: string;
  /** Poll interval of the single Redis reader, ms. Default 1000. */
  intervalMs?: number;
  /** Audit folders to show even when the queue does not hold them (read from their files). */
  auditDirs?: string[];
  /** The audit folder whose private Redis (`canary-audit run`'s) `conn` is, for the unreachable banner; null: a Redis the user gave. */
  privateRedisOf?: string | null;
}

export interface Dashboard {
  url: string;
  /** The URL with the action token, when actions are on. */
  actionUrl: string | null;
  token: string | null;
  source: StatusSource;
  close(): Promise<void>;
}

const ASSETS = join(PACKAGE_ROOT, 'src', 'dashboard', 'assets');
const require = createRequire(import.meta.url);

/** A file of an installed package's build/ folder (packages whose exports hide package.json too). */
function vendorFile(pkg: string, file: string): string {
  let dir = dirname(require.resolve(pkg));
  while (!existsSync(join(dir, 'package.json')) || !existsSync(join(dir, 'build', file))) {
    const up = dirname(dir);
    if (up === dir) throw new Error(`cannot find ${pkg}/build/${file}`);
    dir = up;
  }
  return join(dir, 'build', file);
}

const STATIC: Record<string, { path: () => string; type: string }> = {
  '/': { path: () => join(ASSETS, 'index.html'), type: 'text/html; charset=utf-8' },
  '/assets/app.js': { path: () => join(ASSETS, 'app.js'), type: 'text/javascript; charset=utf-8' },
  '/assets/style.css': { path: () => join(ASSETS, 'style.css'), type: 'text/css; charset=utf-8' },
  '/vendor/vega.min.js': { path: () => vendorFile('vega', 'vega.min.js'), type: 'text/javascript; charset=utf-8' },
  '/vendor/vega-lite.min.js': {
    path: () => vendorFile('vega-lite', 'vega-lite.min.js'),
    type: 'text/javascript; charset=utf-8',
  },
  '/vendor/vega-embed.min.js': {
    path: () => vendorFile('vega-embed', 'vega-embed.min.js'),
    type: 'text/javascript; charset=utf-8',
  },
};

const CSP = [
  "default-src 'none'",
  // Vega compiles its expressions with Function(): 'unsafe-eval', but no inline or remote script.
  "script-src 'self' 'unsafe-eval'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const LOOPBACK = ['127.0.0.1', 'localhost', '::1', '[::1]'];
const WILDCARD = new Set(['0.0.0.0', '::', '[::]', '']);

/**
 * The Host header names a request may carry: loopback, the bind address itself when it is one
 * address (not a wildcard), and the names given. Any other name is a DNS-rebound page: refused.
 */
export function allowedHostNames(bind: string, extra: readonly string[] = []): Set<string> {
  const names = new Set<string>(LOOPBACK);
  const add = (name: string) => {
    const n = name.trim().toLowerCase();
    if (n === '') return;
    names.add(n);
    if (n.includes(':') && !n.startsWith('[')) names.add(`[${n}]`);
  };
  if (!WILDCARD.has(bind)) add(bind);
  for (const name of extra) add(name);
  return names;
}

/** The name part of a Host header (port stripped), lower case. */
function hostName(header: string): string {
  return header.trim().toLowerCase().replace(/:\d+$/, '');
}

export function createDashboardApp(
  source: StatusSource,
  options: DashboardOptions & { actionToken: string | null },
): Hono {
  const app = new Hono();
  const allowed = allowedHostNames(options.host ?? '127.0.0.1', options.allowHosts);
  const plotCache = new Map<string, { key: string; value: unknown }>();

  app.use('*', async (c, next) => {
    // Whatever the bind address, only the allowed names reach the page: a DNS-rebound site cannot.
    if (!allowed.has(hostName(c.req.header('host') ?? ''))) {
      return c.text('forbidden host: start the dashboard with --allow-host NAME for each name it is reached by', 403);
    }
    await next();
    c.header('Content-Security-Policy', CSP);
    c.header('X-Content-Type-Options', 'nosniff');
    c.header('X-Frame-Options', 'DENY');
    c.header('Referrer-Policy', 'no-referrer');
    c.header('Cache-Control', 'no-store');
  });

  for (const [route, file] of Object.entries(STATIC)) {
    app.get(route, async (c) => {
      const body = await readFile(file.path());
      return c.body(body, 200, { 'Content-Type': file.type });
    });
  }

  app.get('/favicon.ico', (c) => c.body(null, 204));

  app.get('/api/snapshot', async (c) => c.json(await source.current()));

  app.get('/api/events', (c) =>
    streamSSE(c, async (stream) => {
      let id = 0;
      const queue: Snapshot[] = [];
      let wake: (() => void) | null = null;
      const unsubscribe = source.subscribe((s) => {
        queue.length = 0;
        queue.push(s);
        wake?.();
      });
      stream.onAbort(() => {
        unsubscribe();
        wake?.();
      });
      try {
        while (!stream.aborted) {
          const next = queue.shift();
          if (next) {
            await stream.writeSSE({ event: 'snapshot', data: JSON.stringify(next), id: String((id += 1)) });
            continue;
          }
          // Wait for the next snapshot, with a comment every 15 s to keep proxies from closing.
          await new Promise<void>((resolve) => {
            const t = setTimeout(resolve, 15_000);
            wake = () => {
              clearTimeout(t);
              resolve();
            };
          });
          wake = null;
          if (!stream.aborted && queue.length === 0) await stream.write(': keep-alive\n\n');
        }
      } finally {
        unsubscribe();
      }
    }),
  );

  app.get('/api/runs/:id', async (c) => {
    const runId = c.req.param('id');
    const job = await source.handles.runs.getJob(runId);
    if (!job) return c.json({ error: `no run ${runId} in the queue` }, 404);
    const { logs } = await source.handles.runs.getJobLogs(runId, -40, -1);
    let trainerLog: string[] | null = null;
    if (options.artifactsDir) {
      try {
        const manifest = resolveInsideArtifacts(options.artifactsDir, job.data.manifest);
        // The worker's boundary check on the log itself: a symlink out of the artifact root is not read.
        const logPath = resolveInsideArtifacts(
          options.artifactsDir,
          toArtifactRelative(options.artifactsDir, join(outputDirOfManifest(manifest), 'trainer.stderr.log')),
        );
        trainerLog = await tailLines(options.artifactsDir, logPath, 40);
      } catch {
        trainerLog = null;
      }
    }
    return c.json({ run_id: runId, failure: job.failedReason || null, job_log: logs, trainer_log: trainerLog });
  });

  app.get('/api/audits/:id/plot', async (c) => {
    const auditId = c.req.param('id');
    const snapshot = await source.current();
    // An audit shown from disk (not in the queue, or Redis gone) is plotted from its own folder.
    const diskDir = source.diskAuditDir(auditId);
    if (!options.artifactsDir && !diskDir)
      return c.json({ spec: null, reason: 'start the dashboard with --artifacts DIR to plot finished runs' });
    const parent = diskDir ? null : await source.handles.audits.getJob(auditId);
    if (!parent && !diskDir) return c.json({ spec: null, reason: `no audit ${auditId} in the queue` }, 404);
    const audit = snapshot.audits.find((a) => a.audit_id === auditId);
    const key = `${audit?.completed ?? 0}`;
    const cached = plotCache.get(auditId);
    if (cached && cached.key === key) return c.json(cached.value);
    let value: unknown;
    try {
      if ((audit?.completed ?? 0) === 0) {
        value = { spec: null, reason: 'no run has finished yet' };
      } else {
        const auditDir =
          diskDir ??
          resolveInsideArtifacts(options.artifactsDir as string, (parent as NonNullable<typeof parent>).data.audit_dir);
        if (!existsSync(auditIndexPath(auditDir))) throw new Error(`${auditDir}/audit.json is not on this host`);
        // The report reads every run's manifest, result and score files: none through a symlink
        // that leads out of the root (runs/<run>/output/scores/<phase>/<file>: five levels). An
        // audit folder named with --audit is the user's own choice.
        if (options.artifactsDir && !(options.auditDirs ?? []).includes(auditDir))
          checkTreeInsideArtifacts(options.artifactsDir, auditDir, 6);
        const { summary } = await computeReport({ auditDir, resamples: 200 });
        const plot = buildPlots(summary).find((p) => p.id === 'exposure-vs-dose');
        // The verdict of each declared comparison, one sentence each, beside the plot.
        const verdicts = (summary.verdicts ?? []).map((v) => v.sentence);
        value = plot
          ? { spec: plot.spec, title: plot.title, reason: null, verdicts }
          : { spec: null, reason: 'no exposure measured yet', verdicts };
      }
    } catch (error) {
      value = { spec: null, reason: `no plot yet: ${error instanceof Error ? error.message : String(error)}` };
    }
    plotCache.set(auditId, { key, value });
    return c.json(value);
  });

  // A finished audit's report.html, as `canary-audit report` wrote it (no script in it).
  app.get('/api/audits/:id/report', async (c) => {
    const audit = (await source.current()).audits.find((a) => a.audit_id === c.req.param('id'));
    if (!audit?.report) return c.json({ error: 'no report for this audit yet' }, 404);
    // Through the read boundary, rooted at the audit's folder: a report.html that is a symlink
    // out of it (to /etc/passwd), a FIFO or a device is refused, never served.
    const auditDir = audit.audit_dir ?? dirname(dirname(audit.report));
    try {
      return c.body(await readInside(auditDir, audit.report, { maxBytes: MAX_REPORT_BYTES, what: 'report' }), 200, {
        'Content-Type': 'text/html; charset=utf-8',
      });
    } catch (error) {
      if (!(error instanceof ReadBoundaryError)) throw error;
      // Removed since the snapshot (a new report being written): not a refusal.
      if ((error.cause as NodeJS.ErrnoException | undefined)?.code === 'ENOENT')
        return c.json({ error: 'no report for this audit yet' }, 404);
      log.warn({ audit: audit.audit_id, reason: error.message }, 'dashboard: report refused');
      return c.json({ error: `report refused: ${error.message}` }, 403);
    }
  });

  const guard = (c: Context): Response | null => {
    if (!options.allowActions || options.actionToken === null) {
      return c.json({ error: 'actions are off: start the dashboard with --allow-actions to cancel or retry' }, 403);
    }
    const origin = c.req.header('origin');
    const expected = [`http://${c.req.header('host') ?? ''}`];
    if (origin !== undefined && !expected.includes(origin)) return c.json({ error: 'cross-site request refused' }, 403);
    const site = c.req.header('sec-fetch-site');
    if (site !== undefined && site !== 'same-origin' && site !== 'none')
      return c.json({ error: 'cross-site request refused' }, 403);
    const given = Buffer.from(c.req.header('x-canary-token') ?? '');
    const want = Buffer.from(options.actionToken);
    if (given.length !== want.length || !timingSafeEqual(given, want))
      return c.json({ error: 'missing or wrong action token' }, 403);
    return null;
  };

  app.post('/api/audits/:id/cancel', async (c) => {
    const refused = guard(c);
    if (refused) return refused;
    try {
      const outcome = await cancelAudit(options.conn, c.req.param('id'), options.artifactsDir);
      log.info({ audit: c.req.param('id') }, 'dashboard: audit cancelled');
      void source.poll();
      return c.json({ ok: true, outcome });
    } catch (error) {
      return c.json({ error: error instanceof Error ? error.message : String(error) }, 400);
    }
  });

  app.post('/api/runs/:id/retry', async (c) => {
    const refused = guard(c);
    if (refused) return refused;
    const job = await source.handles.runs.getJob(c.req.param('id'));
    if (!job) return c.json({ error: 'no such run' }, 404);
    if (!(await job.isFailed()) || /^cancelled: /.test(job.failedReason ?? ''))
      return c.json({ error: 'only a failed run can be retried' }, 409);
    await job.retry('failed');
    log.info({ run: job.id }, 'dashboard: failed run retried');
    void source.poll();
    return c.json({ ok: true });
  });

  app.notFound((c) => c.json({ error: 'not found' }, 404));
  app.onError((error, c) => {
    log.warn({ err: error }, 'dashboard request failed');
    return c.json({ error: error.message }, 500);
  });
  return app;
}

/** Largest report.html the dashboard serves, bytes. */
const MAX_REPORT_BYTES = 128 * 1024 * 1024;

/** The last `n` lines of a trainer log (its last 64 kB), read through the boundary of the artifact root. */
async function tailLines(root: string, path: string, n: number): Promise<string[] | null> {
  if (!existsSync(path)) return null;
  // A log has no size cap (only its tail is read); a FIFO or a link out of the root is refused.
  const { handle, size } = await openInside(root, path, { maxBytes: Number.MAX_SAFE_INTEGER, what: 'trainer log' });
  const start = Math.max(0, size - 64 * 1024);
  try {
    const buf = Buffer.alloc(size - start);
    await handle.read(buf, 0, buf.length, start);
    const lines = buf.toString('utf8').split('\n');
    if (lines[lines.length - 1] === '') lines.pop();
    return lines.slice(-n);
  } finally {
    await handle.close();
  }
}

export async function startDashboard(options: DashboardOptions): Promise<Dashboard> {
  const host = options.host ?? '127.0.0.1';
  const actions = Boolean(options.allowActions);
  const token = actions ? (options.token ?? randomBytes(24).toString('base64url')) : null;
  const source = new StatusSource(options.conn, {
    intervalMs: options.intervalMs ?? 1000,
    actions,
    artifactsDir: options.artifactsDir,
    auditDirs: options.auditDirs ?? [],
    privateRedisOf: options.privateRedisOf ?? null,
  });
  const app = createDashboardApp(source, { ...options, actionToken: token });
  const wanted = options.port ?? 8790;
  let server: ServerType;
  try {
    server = await new Promise((resolve, reject) => {
      const s = serve({ fetch: app.fetch, hostname: host, port: wanted }, () => resolve(s));
      s.once('error', reject);
    });
  } catch (error) {
    // The poller holds a Redis connection: close it, or the process never exits.
    await source.close().catch(() => undefined);
    throw listenError(error, host, wanted);
  }
  const port = (server.address() as AddressInfo).port;
  const shown = host.includes(':') ? `[${host}]` : host;
  const url = `http://${shown}:${port}/`;
  return {
    url,
    actionUrl: token ? `${url}?token=${token}` : null,
    token,
    source,
    async close() {
      await source.close();
      await new Promise<void>((resolve) => {
        (server as { closeAllConnections?: () => void }).closeAllConnections?.();
        server.close(() => resolve());
      });
    },
  };
}

/** Why the server could not listen, in one line (a busy port, an address not on this host). */
function listenError(error: unknown, host: string, port: number): CanaryAuditError {
  const code = (error as { code?: string }).code;
  const where = `${host.includes(':') ? `[${host}]` : host}:${port}`;
  if (code === 'EADDRINUSE')
    return new CanaryAuditError(
      'E_PORT_IN_USE',
      `cannot listen on ${where}: the port is in use (another dashboard?); pass --port N with a free port, or --port 0 for any free one`,
      { cause: error },
    );
  if (code === 'EACCES')
    return new CanaryAuditError(
      'E_PORT_DENIED',
      `cannot listen on ${where}: permission denied (ports below 1024 need root); pass --port N above 1023`,
      { cause: error },
    );
  if (code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND')
    return new CanaryAuditError(
      'E_BAD_HOST',
      `cannot listen on ${where}: ${host} is not an address of this machine; pass --host 127.0.0.1 or 0.0.0.0`,
      { cause: error },
    );
  return new CanaryAuditError(
    'E_LISTEN',
    `cannot listen on ${where}: ${error instanceof Error ? error.message : String(error)}`,
    { cause: error },
  );
}
