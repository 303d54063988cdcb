// tier: slow (redis-server, Python or Chromium)
/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeReport } from '../../src/report/index.js';
import type { ReportSummary } from '../../src/report/summary.js';
import { buildStudyAudit } from '../fixtures/study-audit.js';
import { removeDir, tempDir } from '../queue/helpers/fixtures.js';

/**
 * report.html in headless Chromium, as a reader opens it: the findings first, every plot panel
 * with its axes, no text under 11 px as rendered (SVGs scaled to the page included), and a page
 * whose height is the findings and the main figure, the reference material folded.
 */
const CHROMIUM = '/usr/bin/chromium';
const hasChromium = existsSync(CHROMIUM);
const root = tempDir('report-page');
let browser: Browser | undefined;

beforeAll(async () => {
  if (hasChromium)
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu'] });
});
afterAll(async () => {
  await browser?.close();
  removeDir(root);
});

describe.skipIf(!hasChromium)('report.html in Chromium', () => {
  it('opens with the findings box, has an axis on every panel, no text under 11 px, and folds the reference sections', async () => {
    const study = await buildStudyAudit(root);
    const { files } = await writeReport({ auditDir: study.auditDir, resamples: 100 });
    const html = files.find((f) => f.endsWith('report.html'))!;
    const summary = JSON.parse(readFileSync(join(study.auditDir, 'report', 'summary.json'), 'utf8')) as ReportSummary;
    const page = await browser!.newPage({ viewport: { width: 1280, height: 900 } });
    await page.goto(`file://${html}`);

    // The findings box is the first section, one sentence per comparison with figure, interval and n.
    expect(await page.locator('section').first().getAttribute('id')).toBe('summary');
    expect(await page.locator('section#summary').getAttribute('class')).toBe('summary-box');
    const findings = await page.locator('#summary li').allTextContents();
    expect(findings.length).toBeGreaterThanOrEqual(3);
    for (const f of findings)
      expect(f).toMatch(
        /\d\.\d\d\)? \[[+-]?\d+\.\d\d, [+-]?\d+\.\d\d\].*; (n = \d+|\d+ runs? × \d+ canar|\d+ run pairs? × \d+ canar|\d+ \+ \d+ runs?, )/,
      );
    // Led by one plain sentence per declared comparison, each with its verdict.
    expect(findings[0]).toMatch(
      /^Redacted training at dose \d+( \([^)]*\))? (raised exposure above|is not yet told apart from) the held-out control: .* bits, (decided|undecided)/,
    );
    expect(findings.some((f) => /against .* for held-out canaries of the same runs, Δ/.test(f))).toBe(true);
    expect(findings.some((f) => /paired difference/.test(f))).toBe(true);

    // Folded: reference material; open: the findings, exposure vs dose and its controls.
    const open = await page.evaluate(() =>
      [...document.querySelectorAll('section')].filter((s) => !s.querySelector(':scope > details')).map((s) => s.id),
    );
    expect(open).toEqual(['summary', 'exposure-vs-dose', 'controls']);
    const folded = await page.evaluate(() => document.documentElement.scrollHeight);
    for (const d of await page.locator('details').all())
      await d.evaluate((el) => ((el as HTMLDetailsElement).open = true));

    // Every panel has its own x and y axis: visibility panels (per measure), one panel per paired comparison.
    const focal = summary.groups.filter((g) => g.cohort === 'focal' && g.phase === 'final');
    const visibilities = new Set(focal.map((g) => g.visibility)).size;
    const comparisons = new Set(
      summary.paired
        .filter((p) => p.phase === 'final' && p.probe_kind === 'hidden')
        .map((p) => `${p.axis}:${String(p.from)}:${String(p.to)}`),
    ).size;
    const panels: Record<string, number> = {
      'exposure-vs-dose': visibilities,
      'recovery-vs-dose': visibilities,
      'substituted-vs-dose': 2 * visibilities,
      'paired-differences': comparisons,
    };
    for (const [id, n] of Object.entries(panels)) {
      const figure = page.locator(`#plot-${id} svg`);
      expect(await figure.locator('g[aria-label^="X-axis"]').count(), id).toBe(n);
      expect(await figure.locator('g[aria-label^="Y-axis"]').count(), id).toBe(n);
      // The probe kind is named over the figure itself, not only in the caption.
      expect(await figure.locator('text').allTextContents(), id).toContainEqual(
        expect.stringMatching(/probes|Substituted/),
      );
    }
    // The ceiling is written on its line inside the exposure panels.
    expect(await page.locator('#plot-exposure-vs-dose svg text', { hasText: /^ceiling 13\.29 bits$/ }).count()).toBe(
      visibilities,
    );

    // No text under 11 px as rendered: CSS text, and SVG text times the SVG's scale on the page.
    const small = await page.evaluate(() => {
      const out: string[] = [];
      const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
      for (let n = walker.nextNode(); n; n = walker.nextNode()) {
        const el = n.parentElement;
        if (!el || !n.textContent?.trim()) continue;
        const rect = el.getBoundingClientRect();
        if (rect.width === 0 && rect.height === 0) continue;
        let size = parseFloat(getComputedStyle(el).fontSize);
        const svg = el.closest('svg');
        if (svg) size *= svg.getBoundingClientRect().width / svg.width.baseVal.value;
        if (size < 11) out.push(`${size.toFixed(1)}px: ${n.textContent.trim().slice(0, 40)}`);
      }
      return out;
    });
    expect(small).toEqual([]);

    // The page a reader scrolls: the findings and the main figure, well under the whole report.
    const unfolded = await page.evaluate(() => document.documentElement.scrollHeight);
    expect(folded).toBeLessThan(0.5 * unfolded);
    await page.close();
  }, 120_000);
  it('has no `undefined`, `NaN` or empty entry in its text, its plots’ labels and legends, or the plot specs’ data', async () => {
    const study = await buildStudyAudit(join(root, 'words'));
    const { files } = await writeReport({ auditDir: study.auditDir, resamples: 100 });
    const html = files.find((f) => f.endsWith('report.html'))!;
    const bad = /\b(undefined|NaN)\b/;
    const page = await browser!.newPage({ viewport: { width: 1280, height: 900 } });
    await page.goto(`file://${html}`);
    for (const d of await page.locator('details').all())
      await d.evaluate((el) => ((el as HTMLDetailsElement).open = true));

    // The page as read: every visible line of text, and the SVGs' accessible labels (each mark's data).
    const text = await page.evaluate(() => document.body.innerText);
    expect(text.split('\n').filter((l) => /\b(undefined|NaN)\b/.test(l))).toEqual([]);
    const labels = await page.evaluate(() =>
      [...document.querySelectorAll('svg [aria-label]')].map((e) => e.getAttribute('aria-label') ?? ''),
    );
    expect(labels.length).toBeGreaterThan(0);
    expect(labels.filter((l) => bad.test(l))).toEqual([]);

    // Every legend entry as drawn has a name: the controls' legend names the held-out control once.
    const legends = await page.evaluate(() =>
      [...document.querySelectorAll('svg g.role-legend')].map((g) => ({
        title: g.querySelector('.role-legend-title')?.textContent ?? '',
        entries: [...g.querySelectorAll('.role-legend-label text')].map((t) => t.textContent ?? ''),
      })),
    );
    expect(legends.length).toBeGreaterThan(0);
    for (const l of legends) {
      expect(l.entries.length, l.title).toBeGreaterThan(0);
      for (const e of l.entries) expect(e.trim(), l.title).not.toBe('');
      for (const e of l.entries) expect(e, l.title).not.toMatch(bad);
    }
    const controls = legends.filter((l) => l.title === 'controls');
    expect(controls.length).toBeGreaterThanOrEqual(2);
    for (const l of controls) expect(l.entries).toHaveLength(1);
    await page.close();

    // The specs kept beside the SVGs: no row whose legend field is missing for a layer that draws it.
    const plotsDir = join(study.auditDir, 'report', 'plots');
    const specs = readdirSync(plotsDir).filter((f) => f.endsWith('.vl.json'));
    expect(specs.length).toBeGreaterThanOrEqual(3);
    for (const f of specs) {
      const raw = readFileSync(join(plotsDir, f), 'utf8');
      expect(raw, f).not.toMatch(/\b(undefined|NaN)\b/);
      const spec = JSON.parse(raw) as { data?: { values?: Record<string, unknown>[] } };
      for (const row of spec.data?.values ?? []) {
        for (const [k, v] of Object.entries(row))
          if (typeof v === 'number') expect(Number.isFinite(v), `${f} ${k}`).toBe(true);
      }
    }
  }, 120_000);
});
