import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { computeReport, writeReport } from '../../src/report/index.js';
import { buildDocument } from '../../src/report/document.js';
import { renderMarkdown } from '../../src/report/markdown.js';
import type { DatasetProvenance } from '../../src/contracts/dataset.js';
import type { ReportSummary } from '../../src/report/summary.js';
import { wilsonInterval } from '../../src/metrics/wilson.js';
import { validate } from '../../src/schemas/index.js';
import { parseCsv } from '../../src/datasets/csv.js';
import {
  buildFixtureAudit,
  type FixtureAudit,
  type FixtureRun,
  type OutcomeContext,
} from '../fixtures/audit-builder.js';

/**
 * Task utility beyond loss in the report: replies scored against targets per run (Wilson or
 * bootstrap intervals), per cell (runs pooled), the overview's headline beside the focal exposure,
 * and damaged reply files refused like damaged score files.
 */
const FOCAL = [
  { id: 'f000', code: '4821' },
  { id: 'f001', code: '0007' },
];
const HELD = [{ id: 'h000', code: '1234' }];
const TARGETS = ['card_arrival', 'lost_card', 'top_up', 'refund'];
const gen = (base: string[], final: string[]): FixtureRun['generation'] => ({
  metrics: ['loss', 'accuracy'],
  targets: TARGETS,
  base,
  final,
  task: 'banking77',
});
const BASE = ['card_arrival', 'x', 'y', 'z']; // 1/4
const RUNS: FixtureRun[] = [
  // redacted dose 8, seeds 0 and 1: accuracy 1/4 → 3/4 and 1/4 → 2/4
  {
    cell: { visibility: 'redacted', dose: 8, seed: 0 },
    canaries: FOCAL.map((c) => ({ ...c, dose: 8, visibility: 'redacted' })),
    heldOut: HELD,
    generation: gen(BASE, ['card_arrival', 'lost_card', 'top_up', 'no']),
  },
  {
    cell: { visibility: 'redacted', dose: 8, seed: 1 },
    canaries: FOCAL.map((c) => ({ ...c, dose: 8, visibility: 'redacted' })),
    heldOut: HELD,
    generation: gen(BASE, [' card_arrival ', 'Lost_card', 'top_up', '']),
  },
  // redacted dose 2 and visible dose 8: lower exposure
  {
    cell: { visibility: 'redacted', dose: 2, seed: 0 },
    canaries: FOCAL.map((c) => ({ ...c, dose: 2, visibility: 'redacted' })),
    heldOut: HELD,
    generation: gen(BASE, TARGETS),
  },
  {
    cell: { visibility: 'visible', dose: 8, seed: 0 },
    canaries: FOCAL.map((c) => ({ ...c, dose: 8, visibility: 'visible' })),
    heldOut: HELD,
    generation: gen(BASE, TARGETS),
  },
];
const RANKS: Record<number, number> = { 0: 1, 1: 4, 2: 512, 3: 2048 };
const outcome = (ctx: OutcomeContext): { rank: number } => ({
  rank: ctx.canary.inserted && ctx.phase === 'final' ? (RANKS[ctx.runIndex] ?? 5000) : 5000,
});

let root: string;
let audit: FixtureAudit;
let summary: ReportSummary;
let md: string;

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'ca-utility-'));
  audit = await buildFixtureAudit(root, { name: 'utility-fixture', runs: RUNS, outcome });
  const result = await writeReport({ auditDir: audit.auditDir, seed: 1, resamples: 300, formats: ['md', 'json'] });
  summary = JSON.parse(await readFile(result.summaryPath as string, 'utf8')) as ReportSummary;
  md = await readFile(join(audit.auditDir, 'report', 'report.md'), 'utf8');
});

afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

const runId = (i: number): string => audit.runs[i]?.runId as string;

describe('task utility in the report', () => {
  it('scores each run base → final with Wilson intervals', () => {
    const run = summary.runs.find((r) => r.run_id === runId(1));
    const [acc] = run?.utility?.metrics ?? [];
    // ' card_arrival ' matches after trimming; 'Lost_card' does not (case kept); '' does not
    const w = wilsonInterval(2, 4) as NonNullable<ReturnType<typeof wilsonInterval>>;
    expect(acc).toMatchObject({
      metric: 'accuracy',
      base: { estimate: 0.25, k: 1, n: 4, method: 'wilson' },
      final: { estimate: 0.5, k: 2, lo: w.lo, hi: w.hi, n_runs: 1 },
    });
    expect(acc?.delta).toBeCloseTo(0.25, 12);
  });

  it('pools the runs of a cell (seeds) into one mean resampled runs → rows', () => {
    const group = summary.utility.find((u) => u.n_runs === 2);
    const [acc] = group?.metrics ?? [];
    expect(acc?.final).toMatchObject({
      estimate: 5 / 8,
      n: 8,
      k: 5,
      n_runs: 2,
      method: 'bootstrap',
      resampling: 'hierarchical',
    });
    expect(acc?.base).toMatchObject({ estimate: 0.25, k: 2, n_runs: 2 });
    expect(acc?.final?.lo).toBeLessThanOrEqual(0.5);
    expect(acc?.final?.hi).toBeGreaterThanOrEqual(0.75);
  });

  it('writes utility.csv (loss and each task metric per run, base and final with intervals) and lists it in datapackage.json', async () => {
    const out = join(root, 'csv-out');
    await writeReport({ auditDir: audit.auditDir, seed: 1, resamples: 300, formats: ['csv'], outDir: out });
    const lines = parseCsv(await readFile(join(out, 'utility.csv'), 'utf8'), 'utility.csv').map((r) => r.fields);
    const header = lines[0] as string[];
    expect(header.slice(0, 3)).toEqual(['audit_id', 'run_id', 'cell_id']);
    expect(header.slice(-10)).toEqual([
      'metric',
      'rows',
      'base',
      'base_lo',
      'base_hi',
      'final',
      'final_lo',
      'final_hi',
      'delta',
      'interval',
    ]);
    expect(lines).toHaveLength(1 + RUNS.length * 2);
    const row = lines.find((l) => l.includes(runId(1)) && l.includes('accuracy')) as string[];
    const at = (name: string): string => row[header.indexOf(name)] as string;
    const w = wilsonInterval(2, 4) as NonNullable<ReturnType<typeof wilsonInterval>>;
    expect([at('rows'), at('base'), at('final'), at('final_lo'), at('final_hi'), at('delta'), at('interval')]).toEqual([
      '4',
      '0.25',
      '0.5',
      String(w.lo),
      String(w.hi),
      '0.25',
      'wilson',
    ]);
    const pkg = JSON.parse(await readFile(join(out, 'datapackage.json'), 'utf8')) as {
      resources: { name: string; path: string; schema: { fields: { name: string }[] } }[];
    };
    expect(pkg.resources.map((r) => r.path)).toEqual(['report.csv', 'utility.csv']);
    expect(pkg.resources[1]?.schema.fields.map((f) => f.name)).toEqual(header);
  });

  it('puts the headline in the overview: the highest-exposure arm at its highest dose, utility over the same runs', () => {
    const [h] = summary.utility_headline ?? [];
    expect(h).toMatchObject({
      task: 'banking77',
      metric: 'accuracy',
      exposure: { visibility: 'redacted', dose: 8, probe_kind: 'hidden', n_canaries: 2, n_runs: 2 },
    });
    expect([...(h?.runs ?? [])].sort()).toEqual([runId(0), runId(1)].sort());
    // exposure: ranks 1 and 4 → 13.29 and 11.29 bits, median of the four canaries 12.29
    expect(h?.exposure?.median.estimate).toBeCloseTo(Math.log2(10000) - 1, 10);
    // the same interval as the exposure table's group (same canaries, same runs): one figure, one interval
    const group = summary.groups.find(
      (g) =>
        g.phase === 'final' &&
        g.cohort === 'focal' &&
        g.visibility === 'redacted' &&
        g.dose === 8 &&
        g.probe_kind === 'hidden',
    );
    expect(group?.inserted.n_runs).toBe(2);
    expect(h?.exposure?.median).toEqual(group?.inserted.exposure);
    expect(h?.final?.estimate).toBeCloseTo(5 / 8, 12);
    expect(h?.text).toMatch(
      /^banking77: task accuracy 0\.25 \[[\d.]+, [\d.]+\] → 0\.63 \[[\d.]+, [\d.]+\] while focal exposure reached 12\.29 \[[\d.]+, [\d.]+\] \(ceiling 13\.29\) at dose 8 \(visibility redacted, hidden probes, 2 canaries · 2 runs; utility over the same runs\)\.$/,
    );
    expect(md).toContain(`**Task utility vs exposure** — ${h?.text}`);
    expect(md).toContain('Task metrics per cell');
    expect(md).toContain('Task metrics per run');
    expect(md).toContain('| 1/4 (0.25) [0.05, 0.70] |');
  });

  it('says "utility loss X → Y" for a loss-only task of the same audit, and keeps token F1 and exact match apart', async () => {
    const dir = await mkdtemp(join(root, 'mixed-'));
    const runs: FixtureRun[] = [
      {
        cell: { task: 'tatqa', seed: 0 },
        canaries: FOCAL.map((c) => ({ ...c, dose: 4 })),
        heldOut: HELD,
        generation: {
          metrics: ['exact_match', 'token_f1'],
          targets: ['1,234.5', '12%'],
          base: ['', '12 percent'],
          final: ['$1234.50', '12'],
          task: 'tatqa',
        },
      },
      {
        cell: { task: 'email', seed: 0 },
        canaries: FOCAL.map((c) => ({ ...c, dose: 4 })),
        heldOut: HELD,
        utility: { base_loss: 2, final_loss: 1.5 },
      },
    ];
    const a = await buildFixtureAudit(dir, { name: 'mixed', runs, outcome: () => ({ rank: 16 }) });
    const { summary: s } = await computeReport({ auditDir: a.auditDir, resamples: 200 });
    const tatqa = s.runs.find((r) => r.run_id === a.runs[0]?.runId)?.utility?.metrics ?? [];
    expect(tatqa.map((m) => m.metric)).toEqual(['exact_match', 'token_f1']);
    expect(tatqa[0]).toMatchObject({ base: { k: 1, n: 2 }, final: { k: 1, n: 2 } }); // '12' lacks the target's percent
    expect(tatqa[1]?.final?.estimate).toBeCloseTo((1 + 2 / 3) / 2, 12);
    expect(s.utility_headline?.map((h) => h.text.split(' while')[0])).toEqual([
      expect.stringMatching(/^tatqa: task exact match 0\.50 \[/),
      'synthetic-email: utility loss 2.0000 → 1.5000 (median over runs)',
    ]);
    // the loss-only run gets no metrics
    expect(s.runs.find((r) => r.run_id === a.runs[1]?.runId)?.utility).not.toHaveProperty('metrics');
  });

  it("scores grounding replies by point in box and parse rate against the utility rows' boxes, base → final", async () => {
    const dir = await mkdtemp(join(root, 'gui-'));
    const boxes: [number, number, number, number][] = [
      [0, 0, 10, 10],
      [20, 20, 40, 30],
      [5, 5, 6, 6],
      [100, 0, 120, 20],
    ];
    const targets = boxes.map((b) => `click(x=${(b[0] + b[2]) / 2}, y=${(b[1] + b[3]) / 2})`);
    const base = ['click the box', 'click(x=1, y=1)', 'click(x=5, y=5)', 'nothing']; // 1 of 4 inside, 2 parsed
    const final = ['click(x=5, y=5)', '(30, 25)', 'click(x=9, y=9)', 'click(x=110, y=10)']; // 3 of 4 inside, 4 parsed
    const runs: FixtureRun[] = [
      {
        cell: { task: 'gui', seed: 0 },
        canaries: FOCAL.map((c) => ({ ...c, dose: 4 })),
        heldOut: HELD,
        generation: {
          metrics: ['loss', 'point_in_box', 'parse_rate'],
          targets,
          base,
          final,
          task: 'gui-grounding',
          boxes,
        },
      },
    ];
    const a = await buildFixtureAudit(dir, { name: 'gui', runs, outcome: () => ({ rank: 16 }) });
    const { summary: s } = await computeReport({ auditDir: a.auditDir, resamples: 200 });
    const metrics = s.runs[0]?.utility?.metrics ?? [];
    expect(metrics.map((m) => m.metric)).toEqual(['point_in_box', 'parse_rate']);
    expect(metrics[0]).toMatchObject({
      base: { k: 1, n: 4, method: 'wilson' },
      final: { k: 3, n: 4, method: 'wilson' },
    });
    expect(metrics[1]).toMatchObject({ base: { k: 2, n: 4 }, final: { k: 4, n: 4 } });
    expect(s.utility_headline?.[0]?.text).toMatch(/^gui-grounding: task point-in-box accuracy 0\.25 \[/);
  });

  it('refuses a reply file that changed after result.json was written, naming it', async () => {
    const dir = await mkdtemp(join(root, 'bad-'));
    const a = await buildFixtureAudit(dir, { name: 'bad', runs: RUNS.slice(0, 1), outcome });
    const file = join(a.runs[0]?.dir as string, 'output', 'utility', 'final.jsonl');
    await writeFile(file, (await readFile(file, 'utf8')).replace('no', 'refund'));
    await expect(computeReport({ auditDir: a.auditDir, resamples: 50 })).rejects.toThrow(
      /final\.jsonl.*sha256 .* differs from .* in result\.json/,
    );
  });

  it('takes manifests with and without utility.metrics; a generation metric needs max_new_tokens', async () => {
    const manifest = JSON.parse(await readFile(join(audit.runs[0]?.dir as string, 'manifest.json'), 'utf8')) as {
      utility: Record<string, unknown>;
    };
    expect(validate('manifest', manifest)).toEqual([]);
    const { metrics: _m, max_new_tokens: _t, ...plain } = manifest.utility;
    expect(validate('manifest', { ...manifest, utility: plain })).toEqual([]);
    expect(validate('manifest', { ...manifest, utility: { ...plain, metrics: ['loss'] } })).toEqual([]);
    const missing = validate('manifest', { ...manifest, utility: { ...plain, metrics: ['loss', 'token_f1'] } });
    expect(
      missing.some(
        (e) =>
          e.keyword === 'required' && (e.params as { missingProperty?: string }).missingProperty === 'max_new_tokens',
      ),
    ).toBe(true);
    expect(validate('manifest', { ...manifest, utility: { ...plain, metrics: [] } })).not.toEqual([]);
    expect(
      validate('manifest', { ...manifest, utility: { ...plain, metrics: ['bleu'], max_new_tokens: 4 } }),
    ).not.toEqual([]);
    expect(validate('manifest', { ...manifest, utility: { ...plain, max_new_tokens: 0 } })).not.toEqual([]);
  });

  it("names where each dataset-backed task's rows came from, and warns when its runs read different versions", async () => {
    const file = (sha: string): DatasetProvenance['files'][number] => ({
      split: 'train',
      path: 'data/train-00000-of-00001.parquet',
      sha256: sha.repeat(64),
      bytes: 8876,
    });
    const v1: DatasetProvenance = {
      source: 'hub',
      repo: 'PolyAI/banking77',
      revision: 'main',
      sha: 'a'.repeat(40),
      config: null,
      files: [file('1')],
    };
    const v2: DatasetProvenance = { ...v1, sha: 'b'.repeat(40), files: [file('2')] };
    const runs = RUNS.slice(0, 3).map((r, i) => ({ ...r, dataset: i < 2 ? v1 : v2 }));
    const a = await buildFixtureAudit(join(root, 'datasets'), { name: 'datasets-fixture', runs, outcome });
    const { summary: s } = await computeReport({ auditDir: a.auditDir, seed: 1, resamples: 100 });
    expect(s.datasets?.map((d) => [d.task, d.sha, d.runs.length])).toEqual([
      ['banking77', v1.sha, 2],
      ['banking77', v2.sha, 1],
    ]);
    expect(s.warnings.find((w) => w.kind === 'mixed_dataset_versions')?.message).toMatch(
      /task banking77: its runs read 2 different versions of the dataset \(aaaaaaaaaaaa, bbbbbbbbbbbb\)/,
    );
    const md = renderMarkdown(buildDocument(s));
    expect(md).toContain(
      `Rows of task banking77 (2 run(s)): PolyAI/banking77@main = ${v1.sha}; train: data/train-00000-of-00001.parquet (sha256 111111111111, 8,876 bytes).`,
    );
    // An audit whose manifests record no dataset has no such entry.
    expect(summary).not.toHaveProperty('datasets');
  });
});
