// tier: slow (redis-server, the trainer, Chromium)
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';
import { execa } from 'execa';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDashboard, type Dashboard } from '../../src/dashboard/index.js';
import {
  collectStatus,
  submitAudit,
  type EmbeddedRedis,
  type QueueConnection,
  type SubmitAuditInput,
} from '../../src/queue/index.js';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { buildStudyAudit } from '../fixtures/study-audit.js';
import { expectOutput } from '../helpers/output-schema.js';
import { CLI, startWorker, type WorkerProcess } from '../queue/helpers/cli.js';
import { runMain } from '../queue/helpers/main.js';
import { fastTuning, removeDir, tempDir, waitFor, writeFixtureAudit } from '../queue/helpers/fixtures.js';
import { isolatedConnection, startTestRedis } from '../queue/helpers/redis.js';

/**
 * The dashboard in headless Chromium against a real redis-server and `canary-audit worker`
 * processes running the stand-in trainer. CANARY_AUDIT_SCREENSHOTS=DIR saves the three views.
 */
const CHROMIUM = '/usr/bin/chromium';
const hasChromium = existsSync(CHROMIUM);
const SHOTS = process.env.CANARY_AUDIT_SCREENSHOTS;
const XSS = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">';

const root = tempDir('dashboard');
const artifacts = join(root, 'artifacts');
let redis: EmbeddedRedis;
let conn: QueueConnection;
let browser: Browser;
const dashboards: Dashboard[] = [];
const workers: WorkerProcess[] = [];
const problems: string[] = [];
let failedRun: { auditId: string; runId: string } | null = null;

beforeAll(async () => {
  mkdirSync(artifacts, { recursive: true });
  redis = await startTestRedis(root);
  conn = isolatedConnection(redis);
  if (hasChromium) {
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        '--no-sandbox',
        '--disable-gpu',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    });
  }
});
afterAll(async () => {
  for (const w of workers) w.process.kill('SIGKILL');
  await browser?.close();
  for (const d of dashboards) await d.close();
  await redis?.stop();
  removeDir(root);
});

async function dashboard(allowActions = false): Promise<Dashboard> {
  const d = await startDashboard({ conn, artifactsDir: artifacts, port: 0, intervalMs: 250, allowActions });
  dashboards.push(d);
  return d;
}

async function open(url: string): Promise<Page> {
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  page.on('console', (m) => {
    if (m.type() === 'error' || m.type() === 'warning') problems.push(`${m.type()}: ${m.text()}`);
  });
  page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
  page.on('dialog', (d) => void d.accept());
  await page.goto(url);
  return page;
}

const runState = (page: Page, runId: string) =>
  page.locator(`tr[data-run="${runId}"] td.state`).textContent({ timeout: 10_000 });

async function waitState(page: Page, runId: string, states: string[], timeoutMs = 60_000): Promise<string> {
  return waitFor(
    `${runId} to read ${states.join('/')}`,
    async () => {
      const s = (await runState(page, runId))?.trim() ?? '';
      return states.includes(s) ? s : undefined;
    },
    timeoutMs,
    100,
  );
}

function statusWithHost(url: string, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(url, { headers: { Host: host } }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', reject);
    req.end();
  });
}

/** The study fixture (finished results on disk) as a queue audit: workers reuse its results. */
function studyInput(auditDir: string): SubmitAuditInput {
  const index = JSON.parse(readFileSync(join(auditDir, 'audit.json'), 'utf8')) as {
    id: string;
    name: string;
    runs: { run_id: string; cell_id: string; dir: string }[];
  };
  return {
    auditId: index.id,
    name: index.name,
    auditDir,
    // Only the runs with a result on disk: the stand-in must not write its own results into the study.
    runs: index.runs
      .filter((r) => existsSync(join(auditDir, r.dir, 'output', 'result.json')))
      .map((r) => ({ runId: r.run_id, cellId: r.cell_id, manifestPath: join(auditDir, r.dir, 'manifest.json') })),
  };
}

describe.skipIf(!hasChromium)('dashboard', () => {
  it('shows runs moving waiting → active → completed, a failed run with its error, the XSS grid name as text', async () => {
    const audit = writeFixtureAudit(artifacts, XSS, [
      { updates: 40, knobs: { step_s: 0.05 }, cell: `dose=1,visibility=${XSS}` },
      { updates: 40, knobs: { step_s: 0.05 }, cell: 'dose=2,visibility=visible' },
      { updates: 5, knobs: { fail_exit: 2 }, cell: 'dose=4,visibility=visible' },
    ]);
    await submitAudit(conn, artifacts, audit, fastTuning());
    const d = await dashboard();
    const page = await open(`${d.url}#/`);
    await page.locator(`tr[data-audit="${audit.auditId}"]`).waitFor();
    expect(await page.locator(`tr[data-audit="${audit.auditId}"] .audit-name`).textContent()).toBe(XSS);
    await page.click(`tr[data-audit="${audit.auditId}"] .audit-name`);
    const [ok1, ok2, bad] = audit.runs.map((r) => r.runId) as [string, string, string];
    failedRun = { auditId: audit.auditId, runId: bad };
    expect(await waitState(page, ok1, ['waiting'])).toBe('waiting');
    expect(await page.locator('#audit-name').textContent()).toBe(XSS);
    // The varying axes are columns; the XSS cell value is a cell of text.
    expect(await page.locator('th[data-col="axis:dose"]').count()).toBe(1);
    expect(await page.locator(`tr[data-run="${ok1}"] td.axis`).allTextContents()).toContain(XSS);

    workers.push(
      await startWorker(['--cpu', '2', '--redis', redis.url, '--artifacts', artifacts], {
        CANARY_AUDIT_QUEUE_PREFIX: conn.prefix,
        CANARY_AUDIT_HEARTBEAT_MS: '300',
      }),
    );
    // Every state the page shows for the run, in order, until it ends.
    const seen: string[] = ['waiting'];
    await waitFor(
      'the run to complete on the page',
      async () => {
        const s = (await runState(page, ok1))?.trim() ?? '';
        if (s && seen[seen.length - 1] !== s) {
          seen.push(s);
          if (s === 'active' && SHOTS)
            await page.screenshot({ path: join(SHOTS, 'dashboard-audit-live.png'), fullPage: true });
        }
        return s === 'completed' || s === 'failed' ? true : undefined;
      },
      60_000,
      40,
    );
    expect(seen).toEqual(['waiting', 'active', 'completed']);
    expect(await waitState(page, ok2, ['completed'])).toBe('completed');
    expect(await waitState(page, bad, ['failed'])).toBe('failed');
    await page.locator(`tr[data-failure="${bad}"]`).waitFor();
    expect(await page.locator(`tr[data-failure="${bad}"]`).textContent()).toContain(
      'bad_manifest: planned failure (exit 2)',
    );
    // A completed run has its loss curve; opening the failed run shows its trainer log.
    expect(await page.locator(`tr[data-run="${ok1}"] svg.spark polyline`).count()).toBe(1);
    await page.click(`tr[data-run="${bad}"] td.state`);
    await page.locator('#run-detail .trainer-log').waitFor();
    expect(await page.locator('#run-detail .trainer-log').textContent()).toContain('[canary-audit]');
    expect(await page.locator('#audit-state').textContent()).toBe('finished');
    // Sorting by a column reorders the rows.
    await page.click('th[data-col="axis:dose"]');
    await page.click('th[data-col="axis:dose"]');
    expect(await page.locator('tr.run').first().getAttribute('data-run')).toBe(bad);
    expect(await page.evaluate('window.__pwned')).toBeUndefined();
    if (SHOTS) await page.screenshot({ path: join(SHOTS, 'dashboard-audit.png'), fullPage: true });
    await page.close();
  });

  it('plots exposure vs dose from the report specs as runs finish, served without any CDN', async () => {
    const study = await buildStudyAudit(artifacts);
    await submitAudit(conn, artifacts, studyInput(study.auditDir), fastTuning());
    const d = await dashboard();
    const page = await open(`${d.url}#/audit/${study.auditId}`);
    const requests: string[] = [];
    page.on('request', (r) => requests.push(r.url()));
    await waitFor(
      'every study run to complete',
      async () => {
        const [s] = await collectStatus(conn, study.auditId);
        return s?.state === 'finished' ? s : undefined;
      },
      60_000,
    );
    await page
      .locator('#plot svg.marks')
      .waitFor({ timeout: 30_000 })
      .catch(async (error: unknown) => {
        throw new Error(`${String(error)}; the plot box reads: ${await page.locator('#plot').textContent()}`);
      });
    expect(requests.every((u) => u.startsWith(d.url))).toBe(true);
    if (SHOTS) await page.screenshot({ path: join(SHOTS, 'dashboard-plot.png'), fullPage: true });
    await page.close();
  });

  it('lists workers with heartbeats; a worker killed with SIGKILL turns lost', async () => {
    const long = writeFixtureAudit(artifacts, 'long', [
      { updates: 100_000, checkpointEvery: 100_000, knobs: { step_s: 0.02 }, cell: 'dose=8' },
    ]);
    await submitAudit(conn, artifacts, long, fastTuning());
    const d = await dashboard();
    const page = await open(`${d.url}#/fleet`);
    const worker = workers[0]!;
    const row = (id: string) => page.locator(`tr[data-worker$=":${id}"] td.state`);
    const pid = String(worker.process.pid);
    await waitFor(
      'the worker to be busy',
      async () => ((await row(pid).textContent({ timeout: 5_000 }))?.trim() === 'busy' ? true : undefined),
      30_000,
    );
    expect(await page.locator('#hosts td.throughput').first().textContent()).toMatch(/^\d+\.\d$/);
    if (SHOTS) {
      await page.screenshot({ path: join(SHOTS, 'dashboard-fleet.png'), fullPage: true });
      await page.goto(`${d.url}#/`);
      await page.locator(`tr[data-audit="${long.auditId}"] td.eta`).filter({ hasText: /\d/ }).waitFor();
      await page.screenshot({ path: join(SHOTS, 'dashboard-audits.png'), fullPage: true });
      await page.goto(`${d.url}#/fleet`);
    }
    const env = { CANARY_AUDIT_QUEUE_PREFIX: conn.prefix };
    const busy = await runMain(['status', '--workers', '--redis', redis.url], env);
    expect(busy.stdout).toMatch(new RegExp(`${pid}  busy .*cpu\\d:run-`));
    worker.process.kill('SIGKILL');
    await waitFor(
      'the worker to turn lost',
      async () => ((await row(pid).textContent({ timeout: 5_000 }))?.trim() === 'lost' ? true : undefined),
      30_000,
    );
    const lost = await runMain(['status', '--workers', '--json', '--redis', redis.url], env);
    const fleet = expectOutput<{ workers: { pid: number; state: string }[] }>('fleet-output', lost.stdout);
    expect(fleet.workers.find((w) => w.pid === worker.process.pid)?.state).toBe('lost');
    await page.close();
  });

  it('cancels only with actions enabled, the token, and a same-origin request', async () => {
    const audit = writeFixtureAudit(artifacts, 'to-cancel', [
      { updates: 10, cell: 'dose=1' },
      { updates: 10, cell: 'dose=2' },
    ]);
    await submitAudit(conn, artifacts, audit, fastTuning());
    const readOnly = await dashboard(false);
    const page = await open(`${readOnly.url}#/audit/${audit.auditId}`);
    await page.locator('#runs').waitFor();
    expect(await page.locator('button.cancel').count()).toBe(0);
    const refused = await fetch(`${readOnly.url}api/audits/${audit.auditId}/cancel`, { method: 'POST' });
    expect(refused.status).toBe(403);
    await page.close();

    const withActions = await dashboard(true);
    const url = `${withActions.url}api/audits/${audit.auditId}/cancel`;
    expect((await fetch(url, { method: 'POST' })).status).toBe(403); // no token
    expect(
      (
        await fetch(url, {
          method: 'POST',
          headers: { 'X-Canary-Token': withActions.token!, Origin: 'http://evil.example' },
        })
      ).status,
    ).toBe(403);
    expect((await fetch(url, { method: 'POST', headers: { 'X-Canary-Token': 'wrong' } })).status).toBe(403);
    expect(await statusWithHost(withActions.url, 'evil.example')).toBe(403); // DNS rebinding
    expect((await collectStatus(conn, audit.auditId))[0]?.state).toBe('queued');

    const actions = await open(`${withActions.actionUrl}#/audit/${audit.auditId}`);
    expect(actions.url()).not.toContain('token='); // moved out of the address bar
    // Retry a failed run (from the first audit) through the page's button.
    await actions.goto(`${withActions.url}#/audit/${failedRun!.auditId}`);
    await actions.click(`tr[data-run="${failedRun!.runId}"] button.retry`);
    await waitState(actions, failedRun!.runId, ['waiting']);
    await actions.goto(`${withActions.url}#/audit/${audit.auditId}`);
    await actions.click('button.cancel');
    await waitFor(
      'the audit to read cancelled',
      async () => ((await actions.locator('#audit-state').textContent())?.trim() === 'cancelled' ? true : undefined),
      30_000,
    );
    await actions.close();
  });

  it('printed no console error or warning on any page', () => {
    expect(problems).toEqual([]);
  });

  it('serves the page with a strict policy and one poller for many listeners', async () => {
    const d = await dashboard();
    const res = await fetch(d.url);
    expect(res.headers.get('content-security-policy')).toMatch(/script-src 'self'/);
    expect(await res.text()).not.toMatch(/<script>|src="http/);
    const before = d.source.polls;
    const stops = Array.from({ length: 5 }, () => d.source.subscribe(() => undefined));
    await new Promise((r) => setTimeout(r, 1_100));
    stops.forEach((stop) => stop());
    const polls = d.source.polls - before;
    expect(polls).toBeGreaterThan(1);
    expect(polls).toBeLessThan(8); // ~4 polls at 250 ms, not 5 × 4
    expect(PACKAGE_ROOT).toBeTruthy();
  });

  it('`canary-audit dashboard` prints its URL, serves the page read-only, and exits 0 on SIGTERM', async () => {
    const child = execa(
      process.execPath,
      [...CLI, 'dashboard', '--redis', redis.url, '--port', '0', '--artifacts', artifacts],
      {
        cwd: PACKAGE_ROOT,
        env: { CANARY_AUDIT_QUEUE_PREFIX: conn.prefix },
        reject: false,
        all: true,
      },
    );
    let text = '';
    child.all?.on('data', (chunk: Buffer) => {
      text += chunk.toString();
    });
    const url = await waitFor(
      'the dashboard URL',
      () => /canary-audit dashboard: (http:\/\/127\.0\.0\.1:\d+\/) \(read-only/.exec(text)?.[1],
      30_000,
    );
    const snapshot = (await (await fetch(`${url}api/snapshot`)).json()) as { actions: boolean; audits: unknown[] };
    expect(snapshot.actions).toBe(false);
    expect(snapshot.audits.length).toBeGreaterThan(0);
    child.kill('SIGTERM');
    expect((await child).exitCode).toBe(0);
  });
});
