import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readReportVerdicts, withReportVerdicts } from '../../src/app/report-verdicts.js';
import { versioned } from '../../src/cli/json-output.js';
import type { AuditStatus } from '../../src/queue/status.js';
import { writeReport } from '../../src/report/index.js';
import { buildFixtureAudit, type FixtureAudit } from '../fixtures/audit-builder.js';
import { expectOutput } from '../helpers/output-schema.js';

const canaries = (visibility: string) =>
  Array.from({ length: 6 }, (_, i) => ({ id: `f00${i}`, code: String(1000 + 17 * i), dose: 4, visibility }));
const heldOut = Array.from({ length: 4 }, (_, i) => ({ id: `h00${i}`, code: String(5000 + 31 * i) }));

const status = (audit_id: string, state: AuditStatus['state']): AuditStatus => ({
  audit_id,
  name: audit_id,
  state,
  submitted: '2026-12-04T00:00:00.000Z',
  cancelled_at: null,
  counts: { completed: 6 },
  runs: [],
  summary: null,
});

let root: string;
let audit: FixtureAudit;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'ca-report-verdicts-'));
  audit = await buildFixtureAudit(join(root, 'a'), {
    name: 'verdicts-in-output',
    runs: ['visible', 'redacted'].flatMap((visibility) =>
      [0, 1, 2].map((seed) => ({ cell: { visibility, dose: 4, seed }, canaries: canaries(visibility), heldOut })),
    ),
    outcome: (c) => {
      const k = Number(c.canary.id.slice(-1));
      if (c.canary.inserted && c.run.cell.visibility === 'redacted') return { rank: 1 + k + 3 * c.runIndex };
      return { rank: 600 + 500 * k + 400 * (c.runIndex % 3) };
    },
  });
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

describe('verdicts in run --json and status --json', () => {
  it('the report result carries the verdicts as fields, and run --json validates with them', async () => {
    const written = await writeReport({ auditDir: audit.auditDir, resamples: 200, formats: ['json'] });
    const summary = JSON.parse(await readFile(join(audit.auditDir, 'report', 'summary.json'), 'utf8')) as {
      verdicts: { sentence: string; unadjusted: { verdict: string } }[];
    };
    expect(summary.verdicts.length).toBeGreaterThan(0);
    expect(written.comparisons).toEqual(summary.verdicts);
    expect(written.verdicts).toEqual(summary.verdicts.map((v) => v.sentence));
    const out = expectOutput<{ verdicts: typeof summary.verdicts }>(
      'run-output',
      JSON.stringify(
        versioned('run', {
          audit_id: audit.auditId,
          audit_dir: audit.auditDir,
          interrupted: false,
          counts: { completed: 6 },
          failed: [],
          report: written.files,
          verdicts: written.comparisons,
        }),
      ),
    );
    expect(out.verdicts.map((v) => v.unadjusted.verdict)).toContain('higher');
  });

  it('status --json: a finished audit with a report gets its verdicts; running or folderless ones do not', async () => {
    await writeReport({ auditDir: audit.auditDir, resamples: 200, formats: ['json'] });
    const expected = (
      JSON.parse(await readFile(join(audit.auditDir, 'report', 'summary.json'), 'utf8')) as {
        verdicts: unknown[];
      }
    ).verdicts;
    const dirs: Record<string, string> = { [audit.auditId]: audit.auditDir, 'audit-running': audit.auditDir };
    const audits = await withReportVerdicts(
      [status(audit.auditId, 'finished'), status('audit-running', 'running'), status('audit-elsewhere', 'finished')],
      (id) => dirs[id],
    );
    expect(audits[0]?.verdicts).toEqual(expected);
    expect(audits[1]).not.toHaveProperty('verdicts');
    expect(audits[2]).not.toHaveProperty('verdicts');
    expectOutput('status-output', JSON.stringify(versioned('status', { audits })));
  });

  it('no report, or a damaged one: no verdicts, and status does not fail', async () => {
    expect(await readReportVerdicts(join(root, 'nowhere'))).toBeNull();
    await writeReport({ auditDir: audit.auditDir, resamples: 200, formats: ['json'] });
    await writeFile(join(audit.auditDir, 'report', 'summary.json'), '{"verdicts": [');
    expect(await readReportVerdicts(audit.auditDir)).toBeNull();
    const [a] = await withReportVerdicts([status(audit.auditId, 'finished')], () => audit.auditDir);
    expect(a).not.toHaveProperty('verdicts');
  });
});
