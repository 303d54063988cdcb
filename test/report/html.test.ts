import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium, type BrowserContext } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeReport } from '../../src/report/index.js';
import { buildStudyAudit } from '../fixtures/study-audit.js';

const CHROMIUM = '/usr/bin/chromium';
const hasChromium = existsSync(CHROMIUM);

let root: string;
let htmlPath: string;

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'ca-html-'));
  const audit = await buildStudyAudit(join(root, 'artifacts'));
  const result = await writeReport({ auditDir: audit.auditDir, formats: ['html'], resamples: 200 });
  htmlPath = result.files.find((f) => f.endsWith('report.html')) as string;
});

afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

describe('HTML report', () => {
  it('is one self-contained page: inline SVG plots from Vega-Lite, no script, no external resource', async () => {
    const html = await readFile(htmlPath, 'utf8');
    expect(html.startsWith('<!doctype html>')).toBe(true);
    expect(html).not.toMatch(/<script|<link |src="http|href="http/);
    for (const id of ['exposure-vs-dose', 'recovery-vs-dose', 'paired-differences']) {
      expect(html).toContain(`id="plot-${id}"`);
    }
    // Vega's SVG renderer marks its output with class="marks".
    expect(html.match(/<svg[^>]*class="marks"/g)?.length).toBe(3);
    expect(html).toContain('Failed or missing runs');
  });

  it.skipIf(!hasChromium)('loads in headless Chromium without console errors and renders its plots', async () => {
    const profile = join(root, 'chromium-profile');
    let context: BrowserContext | undefined;
    try {
      // A fresh profile folder per run: nothing from another session leaks into the page.
      context = await chromium.launchPersistentContext(profile, {
        executablePath: CHROMIUM,
        args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
        viewport: { width: 1280, height: 900 },
      });
      const page = await context.newPage();
      const problems: string[] = [];
      page.on('console', (m) => {
        if (m.type() === 'error' || m.type() === 'warning') problems.push(`${m.type()}: ${m.text()}`);
      });
      page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
      page.on('requestfailed', (r) => problems.push(`requestfailed: ${r.url()}`));
      const response = await page.goto(pathToFileURL(htmlPath).href, { waitUntil: 'load' });
      expect(response?.ok()).toBe(true);
      expect(await page.title()).toBe('canary-audit report: study-fixture');

      const plots = await page.$$eval('figure.plot svg', (svgs) =>
        svgs.map((s) => {
          const box = s.getBoundingClientRect();
          return { width: box.width, height: box.height, marks: s.querySelectorAll('path, line, circle, rect').length };
        }),
      );
      expect(plots).toHaveLength(3);
      for (const p of plots) {
        expect(p.width).toBeGreaterThan(200);
        expect(p.height).toBeGreaterThan(100);
        expect(p.marks).toBeGreaterThan(5);
      }
      expect(await page.$$eval('table', (t) => t.length)).toBeGreaterThan(5);

      // Kept in the temporary folder; set CANARY_AUDIT_SCREENSHOT_DIR to keep it for a look.
      const shot = join(process.env.CANARY_AUDIT_SCREENSHOT_DIR ?? root, 'report.png');
      await page.screenshot({ path: shot, fullPage: true });
      expect((await stat(shot)).size).toBeGreaterThan(20_000);
      expect(problems).toEqual([]);
    } finally {
      await context?.close();
    }
  });
});
