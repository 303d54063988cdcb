import {
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  unlinkSync,
  writeFileSync,
  mkdirSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { Manifest } from '../../src/contracts/index.js';
import {
  hashLines,
  planAudit,
  runRenderer,
  trainingRowLines,
  utilityRowLines,
  writeAudit,
} from '../../src/manifest/index.js';
import type { AuditIndex } from '../../src/contracts/index.js';
import { describeSchemaErrors, validate } from '../../src/schemas/index.js';
import { verifyRunFolder } from './verify-run.js';

const root = mkdtempSync(join(tmpdir(), 'canary-write-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const GRID = `# a small audit
name: small
seed: 5
axes:
  visibility: [visible, redacted, encoded:chained-fruit]
  dose: [3]
  placement: [{window: [0.5, 1], spacing: 4}]
  population: [single-dose, {kind: mixed-dose, doses: [6], name: with-6}, none]
  model: [tiny-small]
training: {batch_size: 4, updates: 60, lr: 0.001}
canaries: {focal: 3, held_out: 2}
utility: {rows: 5}
`;
const gridPath = join(root, 'small.yaml');
writeFileSync(gridPath, GRID);

const strip = (m: Manifest): Omit<Manifest, 'provenance'> => {
  const { provenance: _p, ...rest } = m;
  return rest;
};

describe('writeAudit', () => {
  it('writes audit.json, grid.yaml and one complete, verifiable folder per run', async () => {
    const plan = await planAudit(gridPath);
    const written = await writeAudit(plan, join(root, 'a'));
    expect(written.auditDir).toBe(join(root, 'a', 'audits', plan.auditId));
    expect(written.runs).toHaveLength(9);
    expect(readFileSync(join(written.auditDir, 'grid.yaml'), 'utf8')).toBe(GRID);
    const index = JSON.parse(readFileSync(join(written.auditDir, 'audit.json'), 'utf8')) as AuditIndex;
    expect(describeSchemaErrors(validate('audit', structuredClone(index)))).toEqual([]);
    expect(index.id).toBe(plan.auditId);
    expect(index.grid_sha256.slice(0, 12)).toBe(plan.auditId.slice('audit-'.length));
    expect(index.axes.population).toEqual(['single-dose', 'with-6', 'none']);
    expect(index.runs.map((r) => r.run_id)).toEqual(written.runs.map((r) => r.runId));
    expect(readdirSync(written.auditDir).sort()).toEqual(['audit.json', 'grid.yaml', 'runs']);

    for (const run of written.runs) {
      expect(readdirSync(run.runDir).sort()).toEqual(['manifest.json', 'rows.jsonl', 'utility.jsonl']);
      const { manifest, rows } = verifyRunFolder(run.runDir, { spacing: run.cell.population === 'none' ? null : 4 });
      expect(manifest.audit).toMatchObject({
        id: plan.auditId,
        name: 'small',
        grid_file: '../../grid.yaml',
        cell_id: run.cellId,
      });
      expect(manifest.provenance.changed_mid_run).toBe(false);
      expect(manifest.utility?.count).toBe(5);
      for (const row of rows.filter((_, i) => i % 17 === 0))
        expect(describeSchemaErrors(validate('row', structuredClone(row)))).toEqual([]);
      const utility = readFileSync(join(run.runDir, 'utility.jsonl'), 'utf8').trim().split('\n');
      const trained = new Set(rows.map((r) => r.target));
      for (const line of utility) expect(trained.has((JSON.parse(line) as { target: string }).target)).toBe(false);
    }
  });

  it('splices canary rows into the shared background: the same bytes as generating each run in full', async () => {
    const plan = await planAudit(gridPath);
    const written = await writeAudit(plan, join(root, 'a'));
    for (const [k, layout] of plan.runs.entries()) {
      const renderer = runRenderer(plan.grid, layout);
      const expected = hashLines(trainingRowLines(plan.grid, plan.pool, layout, renderer));
      const manifest = JSON.parse(readFileSync(written.runs[k]?.manifestPath ?? '', 'utf8')) as Manifest;
      expect(manifest.rows).toMatchObject({ sha256: expected.sha256, count: expected.count });
      expect(manifest.utility?.sha256).toBe(hashLines(utilityRowLines(plan.grid, plan.pool, renderer)).sha256);
    }
    // Utility rows are the same file for every run of a task (hard-linked, like a pretraining corpus).
    const inodes = new Set(written.runs.map((r) => statSync(join(r.runDir, 'utility.jsonl')).ino));
    expect(inodes.size).toBe(1);
    // One stamp for the whole write: every manifest carries the same provenance.
    const stamps = new Set(
      written.runs.map((r) =>
        JSON.stringify((JSON.parse(readFileSync(r.manifestPath, 'utf8')) as Manifest).provenance),
      ),
    );
    expect(stamps.size).toBe(1);
  });

  it('differs between visibilities only at canary rows', async () => {
    const plan = await planAudit(gridPath);
    const written = await writeAudit(plan, join(root, 'a'));
    const lines = (cell: string): string[] => {
      const run = written.runs.find((r) => r.cellId === cell);
      return readFileSync(join(run?.runDir ?? '', 'rows.jsonl'), 'utf8').split('\n');
    };
    const visible = lines('visibility=visible,population=single-dose');
    const redacted = lines('visibility=redacted,population=single-dose');
    const changed = visible.flatMap((l, i) => (l === redacted[i] ? [] : [i]));
    const manifest = JSON.parse(readFileSync(join(written.runs[0]?.runDir ?? '', 'manifest.json'), 'utf8')) as Manifest;
    expect(changed).toEqual(manifest.canaries.flatMap((c) => c.positions).sort((a, b) => a - b));
  });

  it('is idempotent and byte-identical for the same grid', async () => {
    const plan = await planAudit(gridPath);
    const first = await writeAudit(plan, join(root, 'b'));
    const indexPath = join(first.auditDir, 'audit.json');
    const before = statSync(indexPath).mtimeMs;
    const manifestTimes = first.runs.map((r) => statSync(r.manifestPath).mtimeMs);
    const again = await writeAudit(await planAudit(gridPath), join(root, 'b'));
    expect(again.runs.map((r) => r.runId)).toEqual(first.runs.map((r) => r.runId));
    expect(again.runs.every((r) => !r.created)).toBe(true);
    expect(statSync(indexPath).mtimeMs).toBe(before);
    expect(again.runs.map((r) => statSync(r.manifestPath).mtimeMs)).toEqual(manifestTimes);
    expect(readdirSync(first.auditDir).sort()).toEqual(['audit.json', 'grid.yaml', 'runs']);

    // A second artifact root: same ids, same bytes (manifests differ only in their provenance stamps).
    const other = await writeAudit(await planAudit(gridPath), join(root, 'c'));
    expect(other.runs.map((r) => r.runId)).toEqual(first.runs.map((r) => r.runId));
    for (const [k, run] of other.runs.entries()) {
      const mine = first.runs[k];
      expect(readFileSync(join(run.runDir, 'rows.jsonl'))).toEqual(
        readFileSync(join(mine?.runDir ?? '', 'rows.jsonl')),
      );
      expect(readFileSync(join(run.runDir, 'utility.jsonl'))).toEqual(
        readFileSync(join(mine?.runDir ?? '', 'utility.jsonl')),
      );
      const a = JSON.parse(readFileSync(run.manifestPath, 'utf8')) as Manifest;
      const b = JSON.parse(readFileSync(mine?.manifestPath ?? '', 'utf8')) as Manifest;
      expect(JSON.stringify(strip(a))).toBe(JSON.stringify(strip(b)));
    }
  });

  it('completes a run folder left without its manifest, keeping what else is there', async () => {
    const plan = await planAudit(gridPath);
    const first = await writeAudit(plan, join(root, 'd'));
    const run = first.runs[2];
    if (!run) throw new Error('no run');
    unlinkSync(run.manifestPath);
    writeFileSync(join(run.runDir, 'rows.jsonl'), 'truncated');
    mkdirSync(join(run.runDir, 'output'));
    const again = await writeAudit(plan, join(root, 'd'));
    expect(again.runs[2]?.created).toBe(true);
    verifyRunFolder(run.runDir);
    expect(readdirSync(run.runDir).sort()).toEqual(['manifest.json', 'output', 'rows.jsonl', 'utility.jsonl']);
  });
});
