import { readFile, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { computeReport, type ComputedReport } from '../../src/report/index.js';
import { zlibBytes } from '../../src/metrics/membership-score.js';
import { buildFixtureAudit, type FixtureAudit } from '../fixtures/audit-builder.js';

/**
 * One sampled-text run as the trainer leaves it: the manifest's codes are placeholders, result.json's
 * `sampled_text` holds the texts. f000's greedy output is its sampled secret, f001's the placeholder
 * itself: only the first is a recovery. The secrets differ in how well they compress.
 */
const SECRETS: Record<string, { secret: string; substitute: string }> = {
  f000: { secret: 'aaaaaaaaaaaaaaaa', substitute: 'bbbbbbbbbbbbbbbb' },
  f001: { secret: 'q$7#Lp!x9@Zk2^Wm', substitute: 'r%8&Mo?y0*Yj3~Vn' },
  h000: { secret: 'the sea, the sea', substitute: 'on and on and on' },
};
let root: string;
let audit: FixtureAudit;
const build = async (name: string, withTexts: boolean): Promise<FixtureAudit> => {
  const a = await buildFixtureAudit(join(root, name), {
    name,
    runs: [
      {
        cell: { visibility: 'visible', dose: 4, design: 'sampled-text' },
        canaries: [
          { id: 'f000', code: '1000', dose: 4 },
          { id: 'f001', code: '1001', dose: 4 },
        ],
        heldOut: [{ id: 'h000', code: '2000' }],
        kinds: ['hidden', 'substituted'],
        space: { kind: 'sampled', decoys: 9 },
      },
    ],
    outcome: (c) => ({
      rank: 1,
      greedy:
        c.canary.id === 'f000'
          ? c.kind === 'substituted'
            ? SECRETS.f000?.substitute
            : SECRETS.f000?.secret
          : c.canary.code,
    }),
  });
  const dir = (a.runs[0] as { dir: string }).dir;
  const edit = async (file: string, change: (doc: Record<string, unknown>) => void) => {
    const doc = JSON.parse(await readFile(join(dir, file), 'utf8'));
    change(doc);
    await writeFile(join(dir, file), JSON.stringify(doc));
  };
  const spec = {
    length: 16,
    temperature: 1,
    decoys: 9,
    context: 'reply-start',
    grid_seed: 0,
    seeds: { f000: 1, f001: 2, h000: 3 },
  };
  await edit('manifest.json', (m) => {
    m.sampled_text = spec;
  });
  if (withTexts)
    await edit('output/result.json', (r) => {
      r.sampled_text = { file: 'sampled-text.json', sha256: '0'.repeat(64), ...spec, canaries: SECRETS };
    });
  return a;
};
let report: ComputedReport;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'sampled-text-report-'));
  audit = await build('sampled', true);
  report = await computeReport({ auditDir: audit.auditDir, resamples: 20 });
});
afterAll(() => rm(root, { recursive: true, force: true }));

describe('sampled-text runs in the report', () => {
  it('read the secrets and substitutes from result.json in place of the placeholders', () => {
    const final = report.observations.filter((o) => o.phase === 'final');
    for (const o of final) {
      const t = SECRETS[o.canary_id];
      expect(o.code).toBe(t?.secret);
      expect(o.shown_code).toBe(o.probe_kind === 'substituted' ? t?.substitute : null);
    }
    const hidden = (id: string) => final.find((o) => o.canary_id === id && o.probe_kind === 'hidden');
    expect(hidden('f000')?.greedy_prefill).toMatchObject({ recovered: true });
    expect(hidden('f001')?.greedy_prefill).toMatchObject({ code: '1001', recovered: false });
    const copied = final.find((o) => o.canary_id === 'f000' && o.probe_kind === 'substituted');
    expect(copied?.greedy_prefill).toMatchObject({ recovered: false, copied: true });
    // The zlib ratio's denominator is the text's, not the placeholder's.
    expect(zlibBytes(hidden('f000')?.code as string)).toBeLessThan(zlibBytes(hidden('f001')?.code as string));
  });

  it('refuse a result without the texts its manifest planned', async () => {
    const bare = await build('bare', false);
    await expect(computeReport({ auditDir: bare.auditDir, resamples: 20 })).rejects.toThrow(
      /sampled_text.*is missing but manifest\.json plans sampled-text canaries.*rerun the run/s,
    );
  });
});
