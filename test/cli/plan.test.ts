import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { main } from '../../src/cli/main.js';
import { expectOutput } from '../helpers/output-schema.js';
import { describeSchemaErrors, validate } from '../../src/schemas/index.js';

const root = mkdtempSync(join(tmpdir(), 'canary-plan-cli-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const grid = join(root, 'grid.yaml');
writeFileSync(
  grid,
  `name: cli
axes:
  visibility: [visible, redacted]
  dose: [1, 2]
  population: [single-dose, {kind: mixed-dose, doses: [4], name: with-4}]
  model: [{backend: tiny, label: tiny, pretrain: {updates: 25, batch_size: 4, code_fraction: 0.4}}]
training: {batch_size: 4, updates: 30, lr: 0.001}
canaries: {focal: 2, held_out: 2}
utility: {rows: 2}
`,
);

let out = '';
let err = '';
beforeEach(() => {
  out = '';
  err = '';
  vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => {
    out += String(chunk);
    return true;
  });
  vi.spyOn(process.stderr, 'write').mockImplementation((chunk) => {
    err += String(chunk);
    return true;
  });
});
afterEach(() => vi.restoreAllMocks());

describe('canary-audit plan', () => {
  it('prints one line per run with canaries, appearances per dose and the canary fraction', async () => {
    expect(await main(['plan', grid])).toBe(0);
    const lines = out.split('\n');
    expect(lines[0]).toMatch(/^audit-[0-9a-f]{12} {2}cli: 8 run\(s\), 120 rows each \(30 updates x batch 4\)$/);
    // The base model is described once, not per run.
    expect(lines.filter((l) => l.startsWith('base model'))).toEqual([
      'base model tiny: pretrained on 25 updates x batch 4 = 100 rows, 40% with a visible code, lr 0.006 cosine; 8 run(s), 1 base(s)',
    ]);
    expect(out).toMatch(/visibility=redacted,dose=2,population=with-4\s+4\s+d2:4 d4:8\s+12\s+10\.00%/);
    expect(out).toMatch(/visibility=visible,dose=1,population=single-dose\s+2\s+d1:2\s+2\s+1\.67%/);
    expect(out).toContain('nothing written');
  });

  it('writes the audit with --out and reports run ids in --json', async () => {
    const dir = join(root, 'art');
    expect(await main(['plan', grid, '--json', '--out', dir])).toBe(0);
    const plan = expectOutput<{
      audit_id: string;
      audit_dir: string;
      rows: number;
      runs: {
        run_id: string;
        run_dir: string;
        cell: Record<string, unknown>;
        canary_fraction: number;
        created: boolean;
        appearances_by_dose: Record<string, number>;
        pretrain: unknown;
      }[];
    }>('plan-output', out);
    expect(plan.rows).toBe(120);
    expect(plan.runs).toHaveLength(8);
    expect(plan.audit_dir).toBe(join(dir, 'audits', plan.audit_id));
    expect(readdirSync(join(plan.audit_dir, 'runs')).sort()).toEqual(plan.runs.map((r) => r.run_id).sort());
    for (const run of plan.runs) {
      expect(run.pretrain).toEqual({
        updates: 25,
        batch_size: 4,
        rows: 100,
        lr: 0.006,
        schedule: { kind: 'cosine', warmup_updates: 20, min_lr_ratio: 0.1 },
        code_fraction: 0.4,
        seed: 0,
      });
      expect(readdirSync(run.run_dir).sort()).toEqual([
        'manifest.json',
        'pretrain.jsonl',
        'rows.jsonl',
        'utility.jsonl',
      ]);
    }
    expect(plan.runs.every((r) => r.created)).toBe(true);
    expect(plan.runs[3]).toMatchObject({
      cell: { visibility: 'visible', dose: 2, population: 'with-4' },
      appearances_by_dose: { 2: 4, 4: 8 },
    });
    out = '';
    expect(await main(['plan', grid, '--json', '--out', dir])).toBe(0);
    expect((JSON.parse(out) as typeof plan).runs.every((r) => !r.created)).toBe(true);
  });

  it('prints versioned JSON without --out too, and its schema takes pinned models', async () => {
    expect(await main(['plan', grid, '--json'])).toBe(0);
    const plan = expectOutput<Record<string, unknown>>('plan-output', out);
    expect(plan.schema_version).toBe('canary-audit.plan-output/1');
    expect(Object.keys(plan)[0]).toBe('schema_version');
    expect(plan.audit_dir).toBeUndefined();
    // Pinned model revisions (name, revision, commit sha) validate as an optional list of objects.
    const pinned = {
      ...plan,
      models: [{ name: 'org/model', revision: 'main', sha: 'a'.repeat(40), source: 'hub', cached: false }],
    };
    expectOutput('plan-output', JSON.stringify(pinned));
    expect(describeSchemaErrors(validate('plan-output', { ...plan, models: ['org/model'] }))).not.toEqual([]);
    // Fields the schema does not document are refused: what is printed is what is documented.
    expect(describeSchemaErrors(validate('plan-output', { ...plan, surprise: 1 }))).toEqual([
      '(root): unknown key "surprise"',
    ]);
  });

  it('exits 2 with one line per problem, naming file:line:column, for a bad grid', async () => {
    const bad = join(root, 'bad.yaml');
    writeFileSync(
      bad,
      'axes:\n  visibility: [hidden]\n  dose: [1]\ntraining: {batch_size: 4, updates: 30, lr: 0.001}\n',
    );
    expect(await main(['plan', bad])).toBe(2);
    expect(out).toBe('');
    expect(err).toBe(
      `canary-audit: ${bad}:2:16: axes.visibility[0]: "hidden" is not allowed; use one of "visible", "redacted", "encoded:binary", "encoded:direct-fruit", "encoded:chained-fruit", "encoded:reverse-shift"\n`,
    );
    err = '';
    expect(await main(['plan', join(root, 'missing.yaml')])).toBe(2);
    expect(err).toContain('missing.yaml: cannot read the grid: no such file');
    // The fix is named: check the path, and where the example grids are.
    expect(err).toMatch(/check the path, the examples are in configs\/ \(e\.g\. configs\/quickstart\.yaml\)\n$/);
    err = '';
    expect(await main(['plan', root])).toBe(2);
    expect(err).toContain(`${root}: cannot read the grid: it is a folder; name a grid YAML file`);
  });

  it('exits 2 with one line at the alias or merge key for an alias bomb and a scalar merge key', async () => {
    const bomb = join(root, 'bomb.yaml');
    const levels = ['a: &a [x, x, x, x, x, x, x, x, x, x]'];
    for (let i = 1; i < 8; i += 1)
      levels.push(
        `${String.fromCharCode(97 + i)}: &${String.fromCharCode(97 + i)} [${Array(10)
          .fill(`*${String.fromCharCode(96 + i)}`)
          .join(', ')}]`,
      );
    writeFileSync(bomb, `${levels.join('\n')}\naxes: {visibility: [visible], dose: [1]}\n`);
    err = '';
    expect(await main(['plan', bomb])).toBe(2);
    expect(err).toMatch(
      new RegExp(
        `^canary-audit: ${bomb.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:2:\\d+: YAML: Excessive alias count[^\n]*alias bomb[^\n]*\n$`,
      ),
    );
    const merge = join(root, 'merge.yaml');
    writeFileSync(
      merge,
      'axes:\n  <<: 5\n  visibility: [visible]\n  dose: [1]\ntraining: {batch_size: 4, updates: 30, lr: 0.001}\n',
    );
    err = '';
    expect(await main(['plan', merge])).toBe(2);
    expect(err).toBe(
      `canary-audit: ${merge}:2:3: YAML: Merge sources must be maps or map aliases; a merge key (<<) takes a map or an alias of a map\n`,
    );
  });

  it('warns when a base fixed for every seed meets seeds that vary the training only, and not under joint seeds', async () => {
    const fixed = join(root, 'fixed-base.yaml');
    const text = (extra: string): string => `name: fixed-base
axes:
  visibility: [redacted]
  dose: [1]
  seed: [0, 1]
  model: [{backend: tiny, label: tiny, pretrain: {updates: 25, batch_size: 4, init_seed: 0}}]
training: {batch_size: 4, updates: 30, lr: 0.001}
canaries: {focal: 2, held_out: 2}
${extra}`;
    writeFileSync(fixed, text('replicates: {vary: training}\n'));
    expect(await main(['plan', fixed])).toBe(0);
    expect(err).toContain(
      'canary-audit: warning: model(s) tiny fix their base for every seed (pretrain.init_seed) while the seeds vary the training seed only, so the runs of a cell can be identical; use replicates: {vary: joint}',
    );
    expect(out).toContain(
      'design: one base per model (tiny: init seed 0), 2 fine-tuning seeds per cell, varying the training seed only (data order and placement fixed by the grid seed); intervals generalize over fine-tuning seeds of one base',
    );
    for (const extra of ['replicates: {vary: joint}\n', '']) {
      err = '';
      out = '';
      writeFileSync(fixed, text(extra));
      expect(await main(['plan', fixed])).toBe(0);
      expect(err).not.toContain('pretrain.init_seed');
      expect(out).toContain(
        'design: one base per model (tiny: init seed 0), 2 fine-tuning seeds per cell, each its own data order and canary placement; intervals generalize over fine-tuning seeds of one base\n',
      );
    }
  });

  it('prints the design in one line: a base per seed, one run per cell, and in --json', async () => {
    const grid = join(root, 'design.yaml');
    const text = (seeds: string, extra: string): string => `name: design
axes:
  visibility: [redacted]
  dose: [1, 2]
  seed: ${seeds}
  model: [{backend: tiny, label: tiny, pretrain: {updates: 25, batch_size: 4}}]
training: {batch_size: 4, updates: 30, lr: 0.001}
canaries: {focal: 2, held_out: 2}
${extra}`;
    writeFileSync(grid, text('[0, 1, 2]', 'replicates: {vary: base}\n'));
    expect(await main(['plan', grid])).toBe(0);
    expect(out).toContain(
      'design: a base per seed (tiny: a base per seed), replicates: {vary: base}, 3 seeds per cell, each its own data order and canary placement; intervals generalize over bases and seeds\n',
    );
    expect(out).toContain('6 run(s), 3 base(s)');
    out = '';
    writeFileSync(grid, text('[4]', ''));
    expect(await main(['plan', grid])).toBe(0);
    expect(out).toContain(
      'design: one run per cell (seed 4): intervals cover canary sampling only, a rerun can fall outside them\n',
    );
    out = '';
    writeFileSync(grid, text('[0, 1, 2]', ''));
    expect(await main(['plan', grid, '--json'])).toBe(0);
    expect(describeSchemaErrors(validate('plan-output', JSON.parse(out)))).toEqual([]);
    expect(JSON.parse(out).design).toEqual({
      vary: 'joint',
      written: false,
      population: 'fine-tuning seeds of one base',
      seeds: [0, 1, 2],
      line: expect.stringMatching(/^design: one base per model \(tiny: init seed 0\), 3 fine-tuning seeds per cell/),
    });
  });

  it('has --help and rejects a missing grid argument', async () => {
    expect(await main(['plan', '--help'])).toBe(0);
    expect(out).toContain('Usage: canary-audit plan GRID [--json] [--out DIR]');
    expect(out).toContain('--out DIR');
    expect(await main(['plan'])).toBe(2);
    expect(err).toContain('canary-audit: plan needs GRID; usage: canary-audit plan GRID');
  });
});
