// tier: slow (Chromium)
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
    for (const id of ['exposure-vs-dose', 'recovery-vs-dose', 'substituted-vs-dose', 'paired-differences']) {
      expect(html).toContain(`id="plot-${id}"`);
    }
    // Vega's SVG renderer marks its output with class="marks".
    expect(html.match(/<svg[^>]*class="marks"/g)?.length).toBe(4);
    // The ceiling and the control band are in the legend (inside the SVG), not only the caption.
    const svg = (id: string): string =>
      html.slice(html.indexOf(`id="plot-${id}"`), html.indexOf('<figcaption>', html.indexOf(`id="plot-${id}"`)));
    expect(svg('exposure-vs-dose')).toContain('ceiling log2|C|');
    // Every figure names its candidate space and the ceiling it gives.
    const captions = [...html.matchAll(/<figure class="plot"[\s\S]*?<figcaption>([^<]*)<\/figcaption>/g)].map(
      (m) => m[1] as string,
    );
    expect(captions).toHaveLength(4);
    for (const caption of captions)
      expect(caption).toMatch(
        /ceiling log2\|C\| = log2 [\d,]+ = \d+\.\d\d \((all [\d,]+ codes|true code \+ [\d,]+ sampled decoys)\)/,
      );
    expect(svg('exposure-vs-dose')).toContain('held-out control: median, 95% CI');
    expect(svg('recovery-vs-dose')).toContain('held-out control: rate, 95% CI');
    // Substituted probes: copy rate of the shown code and recovery of the true one.
    expect(svg('substituted-vs-dose')).toContain('copied the shown code');
    expect(svg('substituted-vs-dose')).toContain('recovered the true code');
    expect(html).toContain('Failed or missing runs');
  });

  it.skipIf(!hasChromium)('loads in headless Chromium without console errors and renders its plots', async () => {
    const profile = join(root, 'chromium-profile');
    let context: BrowserContext | undefined;
    try {
      // A fresh profile folder per run: nothing from another session leaks into the page.
      context = await chromium.launchPersistentContext(profile, {
        executablePath: CHROMIUM,
        args: [
          '--headless',
          '--no-sandbox',
          '--disable-gpu',
          '--disable-quic',
          '--no-first-run',
          '--disable-background-networking',
          '--disable-component-update',
          '--disable-sync',
        ],
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
          // Smallest text as rendered on screen (font size times the SVG's scale on the page).
          const scale = box.width / Number(s.getAttribute('width'));
          const style = (globalThis as unknown as { getComputedStyle(e: unknown): { fontSize: string } })
            .getComputedStyle;
          const sizes = [...s.querySelectorAll('text')]
            .map((t) => parseFloat(style(t).fontSize) * scale)
            .filter((x) => x > 0);
          return {
            width: box.width,
            height: box.height,
            marks: s.querySelectorAll('path, line, circle, rect').length,
            smallestText: Math.min(...sizes),
          };
        }),
      );
      expect(plots).toHaveLength(4);
      for (const p of plots) {
        expect(p.width).toBeGreaterThan(400);
        expect(p.height).toBeGreaterThan(200);
        expect(p.marks).toBeGreaterThan(5);
        // Readable: no plot text smaller than 11 px on a 1280 px wide page.
        expect(p.smallestText).toBeGreaterThanOrEqual(11);
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
