/**
 * `plan --out` at the speed of its I/O. Builds every manifest of configs/paper-email.yaml (33 runs
 * x 66,176 rows) and prints, side by side on the same disk in one process:
 *
 *   writeAudit   the writer as it is: background rows generated once per task and each run's
 *                canary rows spliced in, utility rows hard-linked, one provenance stamp per write;
 *   per-run      the previous writer's work for the same runs: every run regenerates its whole
 *                row sequence (background included) and its utility rows, and stamps provenance
 *                (two git calls and a hash of the source tree) per run;
 *   I/O floor    the very same bytes (one written run's lines, held in memory) through the same
 *                hashing, fsynced writer, once per run.
 *
 * Each is printed as a ratio to the I/O floor. Goal: writeAudit ≤ 10 s on 2 cores.
 *
 *   npx tsx bench/plan-paper-email.ts [--grid configs/paper-email.yaml] [--out DIR]
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

const { values } = parseArgs({
  options: { grid: { type: 'string', default: 'configs/paper-email.yaml' }, out: { type: 'string' } },
});
// Before the logger is created (it reads the level once): one line per run would drown the figures.
process.env.CANARY_AUDIT_LOG_LEVEL ??= 'warn';
const { planAudit, writeAudit, writeLines, trainingRowLines, utilityRowLines, runRenderer, buildManifestCore } =
  await import('../src/manifest/index.js');
const { finishProvenance } = await import('../src/provenance/index.js');

const out = values.out ?? mkdtempSync(join(tmpdir(), 'canary-bench-'));
const fmt = (x: number): string => Math.round(x).toLocaleString('en-US');
try {
  const t0 = performance.now();
  const plan = await planAudit(values.grid as string);
  const tPlan = performance.now();
  const written = await writeAudit(plan, join(out, 'now'));
  const seconds = (performance.now() - t0) / 1000;
  // Peak before the baseline loads a run into memory: this is what planning itself needed.
  const peak = process.resourceUsage().maxRSS / 1024;
  const rows = plan.runs.length * plan.grid.rows;

  // The previous writer's per-run work, on the same plan and disk.
  const old = join(out, 'per-run');
  await mkdir(old, { recursive: true });
  const tp0 = performance.now();
  for (const [k, layout] of plan.runs.entries()) {
    const renderer = runRenderer(plan.grid, layout);
    buildManifestCore(plan.grid, plan.auditId, plan.pool, layout);
    await writeLines(join(old, `rows-${k}.jsonl`), trainingRowLines(plan.grid, plan.pool, layout, renderer));
    await writeLines(join(old, `utility-${k}.jsonl`), utilityRowLines(plan.grid, plan.pool, renderer));
    finishProvenance(plan.startStamp);
    rmSync(join(old, `rows-${k}.jsonl`));
    rmSync(join(old, `utility-${k}.jsonl`));
  }
  const perRunSeconds = (performance.now() - tp0) / 1000 + (tPlan - t0) / 1000;

  const sample = readFileSync(join(written.runs[0]?.runDir ?? '', 'rows.jsonl'), 'utf8')
    .split('\n')
    .slice(0, -1);
  const tb0 = performance.now();
  for (let r = 0; r < plan.runs.length; r += 1) {
    const path = join(out, 'baseline.jsonl');
    await writeLines(path, sample);
    rmSync(path);
  }
  const baseSeconds = (performance.now() - tb0) / 1000;

  console.log(
    `grid        ${values.grid} (${plan.auditId}), ${plan.runs.length} runs x ${fmt(plan.grid.rows)} rows = ${fmt(rows)} rows`,
  );
  console.log(`plan        ${((tPlan - t0) / 1000).toFixed(2)} s to validate, expand, draw and place (no rows)`);
  console.log(
    `writeAudit  ${seconds.toFixed(1)} s, ${fmt(rows / seconds)} rows/s (plan + rows + hash + write + manifests)   ratio ${(seconds / baseSeconds).toFixed(2)} x I/O floor`,
  );
  console.log(
    `per-run     ${perRunSeconds.toFixed(1)} s, ${fmt(rows / perRunSeconds)} rows/s (plan + every run regenerated, stamped per run)   ratio ${(perRunSeconds / baseSeconds).toFixed(2)} x I/O floor`,
  );
  console.log(
    `I/O floor   ${baseSeconds.toFixed(1)} s, ${fmt((plan.runs.length * sample.length) / baseSeconds)} rows/s (the same bytes through the same writer)`,
  );
  console.log(`speed-up    ${(perRunSeconds / seconds).toFixed(2)} x (per-run / writeAudit)`);
  console.log(`peak RSS    ${peak.toFixed(0)} MiB (writeAudit)`);
} finally {
  if (values.out === undefined) rmSync(out, { recursive: true, force: true });
}
