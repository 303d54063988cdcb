/**
 * Builds every manifest of configs/paper-email.yaml (33 runs x 66,176 rows) and prints rows per
 * second and peak memory. The baseline, measured in the same process on the same disk, streams
 * the very same bytes (the lines of one written run, held in memory) through the same hashing,
 * fsynced writer: the I/O floor. Their ratio says how much row generation costs on top of I/O.
 *
 *   npx tsx bench/plan-paper-email.ts [--grid configs/paper-email.yaml] [--out DIR]
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

const { values } = parseArgs({ options: { grid: { type: 'string', default: 'configs/paper-email.yaml' }, out: { type: 'string' } } });
// Before the logger is created (it reads the level once): one line per run would drown the figures.
process.env.CANARY_AUDIT_LOG_LEVEL ??= 'warn';
const { planAudit, writeAudit, writeLines } = await import('../src/manifest/index.js');

const out = values.out ?? mkdtempSync(join(tmpdir(), 'canary-bench-'));
const fmt = (x: number): string => Math.round(x).toLocaleString('en-US');
try {
  const t0 = performance.now();
  const plan = await planAudit(values.grid as string);
  const tPlan = performance.now();
  const written = await writeAudit(plan, out);
  const seconds = (performance.now() - t0) / 1000;
  // Peak before the baseline loads a run into memory: this is what planning itself needed.
  const peak = process.resourceUsage().maxRSS / 1024;
  const rows = plan.runs.length * plan.grid.rows;

  const sample = readFileSync(join(written.runs[0]?.runDir ?? '', 'rows.jsonl'), 'utf8').split('\n').slice(0, -1);
  const tb0 = performance.now();
  for (let r = 0; r < plan.runs.length; r += 1) {
    const path = join(out, 'baseline.jsonl');
    await writeLines(path, sample);
    rmSync(path);
  }
  const baseSeconds = (performance.now() - tb0) / 1000;

  console.log(`grid        ${values.grid} (${plan.auditId}), ${plan.runs.length} runs x ${fmt(plan.grid.rows)} rows = ${fmt(rows)} rows`);
  console.log(`plan        ${((tPlan - t0) / 1000).toFixed(2)} s to validate, expand, draw and place (no rows)`);
  console.log(`manifests   ${fmt(rows / seconds)} rows/s: plan + generate + hash + write, ${seconds.toFixed(1)} s`);
  console.log(`baseline    ${fmt((plan.runs.length * sample.length) / baseSeconds)} rows/s: the same bytes through the same writer, ${baseSeconds.toFixed(1)} s`);
  console.log(`ratio       ${(seconds / baseSeconds).toFixed(2)} x the time of the I/O floor`);
  console.log(`peak RSS    ${peak.toFixed(0)} MiB`);
} finally {
  if (values.out === undefined) rmSync(out, { recursive: true, force: true });
}
