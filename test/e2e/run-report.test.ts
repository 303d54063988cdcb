// tier: slow (redis-server, the trainer)
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { validate } from '../../src/schemas/index.js';
import { hasTorch } from '../helpers/torch.js';
import { runMain } from '../queue/helpers/main.js';
import { expectOutput } from '../helpers/output-schema.js';

/**
 * The whole product on one machine, CI-sized: `canary-audit run` on a grid (private redis-server,
 * local CPU workers, the real trainer with a pretrained tiny base), then the report's structure and
 * its provenance. Figures are not asserted: a two-canary audit measures nothing; the quickstart
 * and docs/reproduction.md carry the measurements.
 */
const GRID = fileURLToPath(new URL('./mini-audit.yaml', import.meta.url));
const root = mkdtempSync(join(tmpdir(), 'canary-audit-e2e-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

interface Summary {
  audit: { id: string };
  warnings: { kind: string; message: string }[];
  counts: { runs: number; finished: number; failed: number; missing: number };
  runs: {
    run_id: string;
    status: string;
    phases: string[];
    provenance: Record<
      'controller' | 'trainer',
      { git_commit: string | null; code_sha256: string; changed_mid_run: boolean }
    >;
  }[];
  groups: {
    visibility: string;
    probe_kind: string;
    phase: string;
    inserted: { n_canaries: number; exposure: { estimate: number; lo: number; hi: number } };
    controls: Record<string, unknown>;
  }[];
  provenance: { changed_mid_run: boolean };
}

describe.skipIf(!hasTorch)('canary-audit run, end to end', () => {
  it('trains every run, writes every report format, and names the code that produced each run', async () => {
    const artifacts = join(root, 'artifacts');
    const env = { CANARY_AUDIT_HOME: undefined, REDIS_URL: undefined, CANARY_TRAINER_CACHE: undefined };
    const result = await runMain(['run', GRID, '--cpu', '2', '--artifacts', artifacts, '--json'], env);
    expect(result.code, result.stderr).toBe(0);
    const out = expectOutput<{ audit_id: string; audit_dir: string; counts: Record<string, number>; report: string[] }>(
      'run-output',
      result.stdout,
    );
    expect(out.counts).toEqual({ completed: 2 });

    const reportDir = join(out.audit_dir, 'report');
    for (const file of ['report.md', 'report.csv', 'summary.json', 'report.html']) {
      expect(existsSync(join(reportDir, file)), file).toBe(true);
    }
    const summary = JSON.parse(readFileSync(join(reportDir, 'summary.json'), 'utf8')) as Summary;
    expect(validate('report', summary)).toEqual([]);
    // run --json carries the report's verdicts as fields, the same objects as summary.json's.
    expect((out as { verdicts?: unknown }).verdicts).toEqual((summary as { verdicts?: unknown }).verdicts ?? []);
    expect(summary.audit.id).toBe(out.audit_id);
    expect(summary.counts).toMatchObject({ runs: 2, finished: 2, failed: 0, missing: 0 });

    // Both arms of each cell are there, with the base-model control beside the fine-tuned figure.
    for (const visibility of ['visible', 'redacted']) {
      const group = summary.groups.find(
        (g) => g.visibility === visibility && g.probe_kind === 'hidden' && g.phase === 'final',
      );
      expect(group, visibility).toBeDefined();
      expect(group!.inserted.n_canaries).toBe(2);
      const e = group!.inserted.exposure;
      expect(e.lo).toBeLessThanOrEqual(e.estimate);
      expect(e.estimate).toBeLessThanOrEqual(e.hi);
      expect(Object.keys(group!.controls)).toEqual(expect.arrayContaining(['held_out', 'base']));
    }

    // Provenance: every run names the controller and trainer code (this checkout's commit), and
    // nothing changed while it ran.
    const head = execFileSync('git', ['rev-parse', 'HEAD'], { encoding: 'utf8' }).trim();
    for (const run of summary.runs) {
      expect(run.status).toBe('finished');
      expect(run.phases).toEqual(expect.arrayContaining(['base', 'final']));
      for (const side of ['controller', 'trainer'] as const) {
        expect(run.provenance[side].git_commit).toBe(head);
        expect(run.provenance[side].code_sha256).toMatch(/^[0-9a-f]{64}$/);
        expect(run.provenance[side].changed_mid_run).toBe(false);
      }
    }
    expect(summary.provenance.changed_mid_run).toBe(false);
    // The trainer recorded how far fine-tuning moved every parameter group, and every group moved.
    for (const run of summary.runs) {
      const result = JSON.parse(
        readFileSync(join(out.audit_dir, 'runs', run.run_id, 'output', 'result.json'), 'utf8'),
      ) as { weight_change?: { changed: number; total: number } };
      expect(result.weight_change?.total, run.run_id).toBeGreaterThan(0);
      expect(result.weight_change?.changed).toBe(result.weight_change?.total);
    }
    expect(summary.warnings.map((w) => w.kind)).not.toContain('weights_unchanged');

    // The tidy CSV: one row per run x canary x probe x phase (2 runs x 4 canaries x 2 probes x 2 phases).
    const csv = readFileSync(join(reportDir, 'report.csv'), 'utf8').trim().split('\n');
    expect(csv[0]).toMatch(/^audit_id,run_id,cell_id,/);
    expect(csv[0]).toContain('exposure,exposure_ceiling');
    expect(csv.length - 1).toBe(2 * 4 * 2 * 2);

    const md = readFileSync(join(reportDir, 'report.md'), 'utf8');
    for (const section of ['## Exposure vs dose', '## Controls', '## Recovery', '## Provenance']) {
      expect(md).toContain(section);
    }
    const html = readFileSync(join(reportDir, 'report.html'), 'utf8');
    expect((html.match(/<svg/g) ?? []).length).toBeGreaterThanOrEqual(2);

    // The pretrained base was built once and shared by both runs through the artifact cache.
    const runs = readdirSync(join(out.audit_dir, 'runs'));
    const bases = runs.map((id) => {
      const r = JSON.parse(readFileSync(join(out.audit_dir, 'runs', id, 'output', 'result.json'), 'utf8')) as {
        backend: { base_model?: { kind: string; cache_key?: string; from_cache?: boolean } };
      };
      return r.backend.base_model;
    });
    expect(new Set(bases.map((b) => b?.cache_key)).size).toBe(1);
    expect(bases.filter((b) => b?.from_cache === false)).toHaveLength(1);
  }, 240_000);
});
