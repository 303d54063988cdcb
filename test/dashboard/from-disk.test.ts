// tier: slow (redis-server, Python or Chromium)
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { execa } from 'execa';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDashboard, type Dashboard } from '../../src/dashboard/index.js';
import { freePort, submitAudit, type EmbeddedRedis, type SubmitAuditInput } from '../../src/queue/index.js';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { loadAudit, writeReport } from '../../src/report/index.js';
import { buildStudyAudit } from '../fixtures/study-audit.js';
import { CLI } from '../queue/helpers/cli.js';
import { fastTuning, removeDir, tempDir, waitFor } from '../queue/helpers/fixtures.js';
import { isolatedConnection, startTestRedis } from '../queue/helpers/redis.js';

/**
 * The dashboard when its Redis is gone (`canary-audit run` stops its private one at the end): the
 * audit is shown from its files, finished, with its plot and report, and the page says "queue
 * unreachable" instead of "live".
 */
const CHROMIUM = '/usr/bin/chromium';
const hasChromium = existsSync(CHROMIUM);

const root = tempDir('dashboard-disk');
const artifacts = join(root, 'artifacts');
let redis: EmbeddedRedis | null = null;
let browser: Browser | undefined;
let dashboard: Dashboard | undefined;

beforeAll(async () => {
  mkdirSync(artifacts, { recursive: true });
  if (hasChromium)
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--disable-gpu', '--no-first-run'],
    });
});
afterAll(async () => {
  await browser?.close();
  await dashboard?.close();
  await redis?.stop();
  removeDir(root);
});

/** The study fixture with every run settled: the one never finished gets a failure.json. */
async function finishedStudy(dir: string): Promise<{ auditId: string; auditDir: string }> {
  const study = await buildStudyAudit(dir);
  for (const run of (await loadAudit(study.auditDir)).runs) {
    if (run.status !== 'missing') continue;
    mkdirSync(run.outputDir, { recursive: true });
    writeFileSync(
      join(run.outputDir, 'failure.json'),
      JSON.stringify({
        run_id: run.run_id,
        kind: 'crash',
        message: 'lost',
        attempts: 3,
        time: new Date().toISOString(),
      }),
    );
  }
  await writeReport({ auditDir: study.auditDir, resamples: 50 });
  return { auditId: study.auditId, auditDir: study.auditDir };
}

describe.skipIf(!hasChromium)('dashboard without its Redis', () => {
  it('an open page turns to "queue unreachable" and shows the audit finished, with its plot and report, when Redis stops', async () => {
    const study = await finishedStudy(artifacts);
    redis = await startTestRedis(root);
    const conn = isolatedConnection(redis);
    const index = JSON.parse(readFileSync(join(study.auditDir, 'audit.json'), 'utf8')) as {
      runs: { run_id: string; cell_id: string; dir: string }[];
    };
    const input: SubmitAuditInput = {
      auditId: study.auditId,
      name: 'study-fixture',
      auditDir: study.auditDir,
      runs: index.runs.map((r) => ({
        runId: r.run_id,
        cellId: r.cell_id,
        manifestPath: join(study.auditDir, r.dir, 'manifest.json'),
      })),
    };
    await submitAudit(conn, artifacts, input, fastTuning()); // no worker: it stays queued in Redis
    dashboard = await startDashboard({ conn, artifactsDir: artifacts, port: 0, intervalMs: 250 });
    const page = await browser!.newPage({ viewport: { width: 1400, height: 900 } });
    await page.goto(`${dashboard.url}#/audit/${study.auditId}`);
    await page.locator('#live', { hasText: /^live$/ }).waitFor({ timeout: 15_000 });
    expect((await page.locator('#audit-state').textContent())?.trim()).toBe('queued');

    await redis.stop();
    redis = null;
    await page.locator('#live', { hasText: 'queue unreachable' }).waitFor({ timeout: 30_000 });
    await page.locator('#audit-state', { hasText: /^finished$/ }).waitFor({ timeout: 10_000 });
    expect(await page.locator('#error').textContent()).toMatch(
      /^queue unreachable: Redis at redis:\/\/:\*\*\*@127\.0\.0\.1:\d+\/0 does not answer/,
    );
    expect(await page.locator('#error').textContent()).not.toMatch(/max retries|ECONNREFUSED/);
    expect(await page.locator('#audit-origin').textContent()).toContain(
      `Finished: every run has its result or failure on disk. Read from ${study.auditDir}.`,
    );
    await page.locator('#plot svg.marks').waitFor({ timeout: 30_000 });
    // Back to the list and to the audit again: the plot is drawn again, not left at its placeholder.
    await page.goto(`${dashboard.url}#/`);
    await page.locator('#audits').waitFor({ timeout: 10_000 });
    await page.goto(`${dashboard.url}#/audit/${study.auditId}`);
    await page.locator('#plot svg.marks').waitFor({ timeout: 15_000 });
    // No `undefined`, `NaN` or empty entry in the page's text, the plot's mark labels or its legends.
    expect(
      (await page.evaluate(() => document.body.innerText)).split('\n').filter((l) => /\b(undefined|NaN)\b/.test(l)),
    ).toEqual([]);
    const labels = await page
      .locator('#plot svg [aria-label]')
      .evaluateAll((els) => els.map((e) => e.getAttribute('aria-label') ?? ''));
    expect(labels.length).toBeGreaterThan(0);
    expect(labels.filter((l) => /\b(undefined|NaN)\b/.test(l))).toEqual([]);
    const legend = await page.locator('#plot svg g.role-legend .role-legend-label text').allTextContents();
    expect(legend.length).toBeGreaterThan(0);
    expect(legend.filter((t) => t.trim() === '' || /\b(undefined|NaN)\b/.test(t))).toEqual([]);
    // Nothing reads "active" or a live ETA any more.
    expect(await page.locator('#runs td.state', { hasText: /active|waiting/ }).count()).toBe(0);
    const href = await page.locator('#report-link').getAttribute('href');
    const report = await fetch(new URL(href!, dashboard.url));
    expect(report.status).toBe(200);
    expect(await report.text()).toContain('<html');
    await page.close();
  }, 120_000);

  it('`dashboard --audit DIR` starts on a stopped private Redis, shows the audit from disk, and stops on SIGTERM', async () => {
    const study = await finishedStudy(join(root, 'second'));
    // What `canary-audit run` leaves behind: redis.conf and redis.pass of a Redis no longer running.
    const redisDir = join(study.auditDir, 'redis');
    mkdirSync(redisDir, { recursive: true });
    writeFileSync(join(redisDir, 'redis.conf'), `port ${await freePort()}\nbind 127.0.0.1\n`);
    writeFileSync(join(redisDir, 'redis.pass'), 'secret\n');
    const child = execa(
      process.execPath,
      [...CLI, 'dashboard', '--audit', study.auditDir, '--port', '0', '--interval', '300'],
      {
        cwd: PACKAGE_ROOT,
        env: { REDIS_URL: '', CANARY_AUDIT_LOG_FORMAT: 'json' },
        reject: false,
        all: true,
        buffer: { all: true },
      },
    );
    let output = '';
    child.all?.on('data', (chunk: Buffer) => void (output += chunk.toString()));
    const url = await waitFor('the dashboard URL', () => /(http:\/\/127\.0\.0\.1:\d+\/)/.exec(output)?.[1], 60_000);
    expect(output).toContain('queue unreachable, showing the audit from its files');
    expect(output).not.toContain('secret');
    const snapshot = await waitFor(
      'a snapshot from disk',
      async () => {
        const s = (await (await fetch(`${url}api/snapshot`)).json()) as {
          queue: string;
          audits: { audit_id: string; state: string; report: string | null }[];
        };
        return s.audits.length > 0 ? s : undefined;
      },
      30_000,
    );
    expect(snapshot.queue).toBe('unreachable');
    expect(snapshot.audits).toEqual([
      expect.objectContaining({
        audit_id: study.auditId,
        state: 'finished',
        report: join(study.auditDir, 'report', 'report.html'),
      }),
    ]);
    // The banner names the situation: run's private Redis, stopped (not a Redis the user gave).
    expect((snapshot as unknown as { error: string }).error).toBe(
      `queue unreachable: the private Redis \`canary-audit run\` started for ${study.auditDir} is not running (run stops it when the audit ends); audits are shown from their files on disk`,
    );
    child.kill('SIGTERM');
    const result = await child;
    expect(result.exitCode, result.all).toBe(0);
  }, 120_000);
});

describe('dashboard with a live Redis and an audit only on disk', () => {
  it('lists the audit from the artifact root beside the queue, with loss, loss curve, rows/s and attempts from its run files', async () => {
    const dir = join(root, 'live');
    const liveArtifacts = join(dir, 'artifacts');
    const study = await finishedStudy(liveArtifacts);
    // One finished run as a worker leaves it: a result with its rows/s, two attempts in its trainer log.
    const run = (await loadAudit(study.auditDir)).runs.find((r) => r.status === 'finished')!;
    const result = JSON.parse(readFileSync(run.resultPath, 'utf8')) as { training: Record<string, unknown> };
    result.training.rows_per_s = 123.4;
    writeFileSync(run.resultPath, JSON.stringify(result));
    writeFileSync(
      join(run.outputDir, 'trainer.stderr.log'),
      [
        `[canary-audit] 2026-01-02T03:04:05.000Z attempt 1 of ${run.run_id} on node-a gpu=none worker_pid=11`,
        'Traceback (most recent call last): killed',
        `[canary-audit] 2026-01-02T03:05:00.000Z attempt 2 of ${run.run_id} on node-b gpu=1 worker_pid=12`,
        '',
      ].join('\n'),
    );
    const own = await startTestRedis(dir);
    const live = await startDashboard({
      conn: isolatedConnection(own),
      artifactsDir: liveArtifacts,
      port: 0,
      intervalMs: 250,
    });
    try {
      const snapshot = (await (await fetch(`${live.url}api/snapshot`)).json()) as {
        queue: string;
        error: string | null;
        audits: {
          audit_id: string;
          source: string;
          state: string;
          runs: {
            run_id: string;
            loss: number | null;
            loss_curve: [number, number][];
            rows_per_s: number | null;
            attempt: number;
            host: string | null;
            gpu: string | null;
            started: string | null;
          }[];
        }[];
      };
      expect(snapshot.queue).toBe('live');
      expect(snapshot.error).toBeNull();
      // The queue is empty: the audit comes from disk, finished, with each finished run's training.
      expect(snapshot.audits.map((a) => [a.audit_id, a.source, a.state])).toEqual([
        [study.auditId, 'disk', 'finished'],
      ]);
      const view = snapshot.audits[0]!.runs.find((r) => r.run_id === run.run_id)!;
      expect(view).toMatchObject({
        loss: 0.5,
        rows_per_s: 123.4,
        attempt: 2,
        host: 'node-b',
        gpu: '1',
        started: '2026-01-02T03:04:05.000Z',
      });
      expect(view.loss_curve.length).toBeGreaterThanOrEqual(2);
      expect(view.loss_curve.at(-1)?.[1]).toBe(0.5);
      // Every finished run has its curve; a run with no trainer log has no attempt to show.
      const finished = snapshot.audits[0]!.runs.filter((r) => r.loss !== null);
      expect(finished.length).toBeGreaterThan(1);
      for (const r of finished) expect(r.loss_curve.length, r.run_id).toBeGreaterThan(0);
    } finally {
      await live.close();
      await own.stop();
    }
  }, 120_000);
});
