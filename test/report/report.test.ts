// tier: slow (Python)
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { computeReport, findings, writeReport } from '../../src/report/index.js';
import { readScoreFile } from '../../src/report/scores.js';
import { trainerPython } from '../../src/runner/python.js';
import type { ReportSummary } from '../../src/report/summary.js';
import { validate } from '../../src/schemas/index.js';
import { median } from '../../src/metrics/statistics.js';
import type { FixtureAudit } from '../fixtures/audit-builder.js';
import { buildStudyAudit, EXPECTED } from '../fixtures/study-audit.js';

/** The typed pandas load documented in docs/reports.md (kept in step by the test below). */
const PANDAS_LOAD =
  'import json, pandas as pd; df = pd.read_csv("report.csv", keep_default_na=False, na_values=[""], dtype={f["name"]: {"string": "string", "integer": "Int64", "number": "float64", "boolean": "boolean"}[f["type"]] for f in json.load(open("datapackage.json"))["resources"][0]["schema"]["fields"]})';
// pandas is in the trainer's Python (trainer-py/pyproject.toml's test extras, the lock).
const hasPandas = spawnSync(trainerPython(), ['-c', 'import pandas'], { stdio: 'ignore' }).status === 0;

let root: string;
let audit: FixtureAudit;
let summary: ReportSummary;
let files: string[];
let written: Awaited<ReturnType<typeof writeReport>>;

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'ca-report-'));
  audit = await buildStudyAudit(root);
  const result = await writeReport({ auditDir: audit.auditDir, seed: 3, resamples: 400 });
  files = result.files;
  written = result;
  summary = JSON.parse(await readFile(result.summaryPath as string, 'utf8')) as ReportSummary;
});

afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

/** RFC 4180 fields of one line (quotes, doubled quotes, commas inside quotes). */
function parseCsvLine(line: string): string[] {
  const out: string[] = [];
  let field = '';
  let quoted = false;
  for (let i = 0; i < line.length; i += 1) {
    const ch = line[i] as string;
    if (quoted) {
      if (ch === '"' && line[i + 1] === '"') {
        field += '"';
        i += 1;
      } else if (ch === '"') quoted = false;
      else field += ch;
    } else if (ch === '"') quoted = true;
    else if (ch === ',') {
      out.push(field);
      field = '';
    } else field += ch;
  }
  out.push(field);
  return out;
}

const runId = (i: number): string => audit.runs[i]?.runId as string;

function lateGroup(kind = 'hidden') {
  return summary.groups.find(
    (g) =>
      g.cohort === 'focal' &&
      g.phase === 'final' &&
      g.probe_kind === kind &&
      g.label === 'placement=late, population=single, visibility=redacted',
  );
}

describe('writeReport on the study fixture', () => {
  it('writes every format into <audit>/report, the summary valid against its schema', async () => {
    const names = files.map((f) => f.slice(join(audit.auditDir, 'report').length + 1)).sort();
    expect(names).toEqual(
      [
        'datapackage.json',
        'plots/exposure-vs-dose.svg',
        'plots/exposure-vs-dose.vl.json',
        'plots/paired-differences.svg',
        'plots/paired-differences.vl.json',
        'plots/recovery-vs-dose.svg',
        'plots/recovery-vs-dose.vl.json',
        'plots/substituted-vs-dose.svg',
        'plots/substituted-vs-dose.vl.json',
        'report.csv',
        'report.html',
        'report.md',
        'summary.json',
      ].sort(),
    );
    expect(validate('report', summary)).toEqual([]);
    expect(summary.schema_version).toBe('canary-audit.report/2');
    expect(summary.provenance.at_write.component).toBe('controller');
  });

  it('leads summary.json with the headline, the finding `run` prints: the control comparison with the largest effect', () => {
    const controls = findings(summary).filter((f) => f.kind === 'control');
    expect(controls.length).toBeGreaterThan(1);
    const largest = controls.reduce((a, b) => (b.weight > a.weight ? b : a));
    expect(summary.headline).toBe(largest.text);
    expect(summary.headline).toMatch(/bits/);
    expect(written.headline).toBe(summary.headline);
    // Near the top of the file, before the runs and groups a reader scrolls past.
    expect(Object.keys(summary).indexOf('headline')).toBeLessThan(Object.keys(summary).indexOf('runs'));
  });

  it('counts runs by status and lists failed and missing ones without failing', () => {
    expect(summary.counts).toMatchObject({
      runs: 8,
      finished: 6,
      failed: 1,
      missing: 1,
      no_canary_runs: 1,
      observations: EXPECTED.observations,
      score_files: EXPECTED.observations,
    });
    const failed = summary.runs.find((r) => r.run_id === runId(5));
    expect(failed).toMatchObject({ status: 'failed', failure: { kind: 'oom', attempts: 3 } });
    expect(summary.runs.find((r) => r.run_id === runId(6))).toMatchObject({ status: 'missing' });
    expect(summary.warnings.map((w) => w.kind)).toEqual(expect.arrayContaining(['failed_runs', 'missing_runs']));
  });

  it('pools seeds: median exposure, its n and the ceiling', () => {
    const g = lateGroup();
    expect(g).toBeDefined();
    expect(g?.dose).toBe(8);
    expect(g?.space.ceiling).toBeCloseTo(13.2877, 4);
    expect(g?.inserted).toMatchObject({ n_obs: 6, n_canaries: 3, n_runs: 2 });
    // 3 of the 6 values sit at the ceiling (rank 1): the median is read on the ranks, since the
    // bootstrap variance collapses on such a pile (docs/metrics.md, coverage); 2 runs are flagged.
    expect(g?.inserted.exposure).toMatchObject({
      n: 6,
      n_clusters: 2,
      resampling: 'crossed',
      method: 'rank',
      flags: ['2 runs per arm: interval may be too narrow'],
    });
    expect(g?.inserted.exposure?.estimate).toBeCloseTo(EXPECTED.lateMedian, 10);
    expect(median(EXPECTED.lateExposures)).toBeCloseTo(EXPECTED.lateMedian, 10);
    expect(g?.inserted.exposure?.lo).toBeLessThanOrEqual(EXPECTED.lateMedian);
    expect(g?.inserted.exposure?.hi).toBeLessThanOrEqual(g?.space.ceiling as number);
    // Greedy recovery: rank 1 in 3 of 6; free decoding missed f000 in run 1 (measured there only).
    expect(g?.inserted.recovery.prefill).toMatchObject({ k: 3, n: 6 });
    expect(g?.inserted.recovery.free).toMatchObject({ k: 0, n: 3 });
    expect(g?.inserted.top1).toMatchObject({ k: 3, n: 6 });
  });

  it('puts the three controls beside the focal figure', () => {
    const g = lateGroup();
    expect(g?.controls.held_out?.exposure?.estimate).toBeCloseTo(EXPECTED.heldOutMedian, 10);
    expect(g?.controls.held_out).toMatchObject({ n_obs: 4, n_canaries: 2, n_runs: 2 });
    expect(g?.controls.held_out?.difference?.estimate).toBeCloseTo(EXPECTED.lateMedian - EXPECTED.heldOutMedian, 10);
    expect(g?.controls.base?.exposure?.estimate).toBeCloseTo(EXPECTED.baseMedian, 10);
    expect(g?.controls.base?.n_obs).toBe(6);
    // Both seeds' late runs pair with the single no-canary run; its 3 canaries count once.
    expect(g?.controls.no_canary).toMatchObject({ n_obs: 3, n_canaries: 3, n_runs: 1 });
    expect(g?.controls.no_canary?.exposure?.estimate).toBeCloseTo(EXPECTED.noCanaryMedian, 10);
  });

  it('reports copy rate against recall on substituted probes', () => {
    const visible = summary.groups.find(
      (g) => g.phase === 'final' && g.probe_kind === 'substituted' && g.visibility === 'visible',
    );
    expect(visible?.inserted.copy?.prefill).toMatchObject({ k: 3, n: 3, rate: 1 });
    expect(visible?.inserted.recovery.prefill).toMatchObject({ k: 0, n: 3 });
    const redacted = lateGroup('substituted');
    expect(redacted?.inserted.copy?.prefill).toMatchObject({ k: 0, n: 6 });
    expect(redacted?.inserted.recovery.prefill).toMatchObject({ k: 3, n: 6 });
  });

  it('pairs placement early → late by canary id and code', () => {
    const p = summary.paired.find(
      (x) => x.axis === 'placement' && x.cohort === 'focal' && x.probe_kind === 'hidden' && x.phase === 'final',
    );
    expect(p).toMatchObject({
      from: 'early',
      to: 'late',
      n_pairs: 6,
      n_run_pairs: 2,
      n_canaries: 3,
      rose: 6,
      fell: 0,
      tied: 0,
      dose: 8,
    });
    // audit.json cells carry every axis; the constant ones (schedule, task) are context too.
    expect(p?.context).toEqual({
      dose: 8,
      model: 'tiny',
      population: 'single',
      schedule: 'constant',
      task: 'synthetic-email',
      visibility: 'redacted',
    });
    expect(p?.label).toBe('dose=8, population=single, visibility=redacted');
    expect(p?.difference.estimate).toBeCloseTo(EXPECTED.placementMedianDifference, 10);
    const held = summary.paired.find(
      (x) => x.axis === 'placement' && x.cohort === 'held_out' && x.probe_kind === 'hidden',
    );
    expect(held).toMatchObject({ n_pairs: 4, tied: 4 });
    // The no-canary cell leaves dose and placement null, so it differs from its twin in three
    // axes: it serves as a control (matched by axes), not as a paired comparison.
    expect(summary.paired.some((x) => x.axis === 'population')).toBe(false);
    const visibility = summary.paired.find(
      (x) => x.axis === 'visibility' && x.cohort === 'focal' && x.probe_kind === 'hidden',
    );
    expect(visibility).toMatchObject({ from: 'visible', to: 'redacted', n_pairs: 3, rose: 3 });
  });

  it('flags mixed code versions and stamps that changed mid-run', () => {
    const mixed = summary.warnings.find((w) => w.kind === 'mixed_code_versions');
    // b… (most runs), d… (run 4) and f… (run 2's write-time stamp, which changed mid-run).
    expect(mixed?.message).toMatch(/3 different trainer code versions/);
    expect(mixed?.runs).toContain(runId(4));
    const changed = summary.warnings.find((w) => w.kind === 'changed_mid_run');
    expect(changed?.runs).toEqual([runId(2)]);
    expect(summary.runs.find((r) => r.run_id === runId(2))?.provenance.trainer?.changed_mid_run).toBe(true);
  });

  it('reports utility before and after, per run and per cell', () => {
    const r1 = summary.runs.find((r) => r.run_id === runId(1));
    expect(r1?.utility).toMatchObject({ rows: 8, base_loss: 2, final_loss: 1.2 });
    expect(r1?.utility?.delta).toBeCloseTo(-0.8, 12);
    const none = summary.utility.find((u) => u.no_canary);
    // Null axes and the constant model axis are left out of labels.
    expect(none).toMatchObject({ n_runs: 1, final_loss: 1.1, label: 'population=none, visibility=redacted' });
    // Grouped by the full cell (placement and dose too), not by visibility alone.
    expect(summary.utility.map((u) => u.label)).toEqual([
      'population=none, visibility=redacted',
      'dose=8, placement=early, population=single, visibility=redacted',
      // Values in the grid's order: visible before redacted.
      'dose=8, placement=late, population=single, visibility=visible',
      'dose=8, placement=late, population=single, visibility=redacted',
    ]);
    expect(summary.utility.find((u) => u.label.includes('placement=early'))?.n_runs).toBe(2);
  });

  it('writes a tidy CSV: one row per run × canary × probe × phase with cell values', async () => {
    const csv = (await readFile(join(audit.auditDir, 'report', 'report.csv'), 'utf8')).trimEnd().split('\n');
    expect(csv).toHaveLength(EXPECTED.observations + 1);
    const header = parseCsvLine(csv[0] as string);
    expect(header.slice(0, 9)).toEqual([
      'audit_id',
      'run_id',
      'cell_id',
      'cell.visibility',
      'cell.dose',
      'cell.placement',
      'cell.population',
      'cell.seed',
      'cell.model',
    ]);
    const row = csv.find((l) => l.includes(runId(1)) && l.includes(',f001.hidden,') && l.includes(',final,'));
    const fields = parseCsvLine(row as string);
    expect(fields).toHaveLength(header.length);
    const values = Object.fromEntries(header.map((h, i) => [h, fields[i]]));
    expect(values.cell_id).toBe('dose=8,model=tiny,placement=late,population=single,seed=0,visibility=redacted');
    expect(values).toMatchObject({
      'cell.placement': 'late',
      'cell.dose': '8',
      rank: '2',
      ties: '1',
      role: 'focal',
      dose: '8',
      probe_kind: 'hidden',
      recovered_prefill: 'false',
    });
    expect(Number(values.exposure)).toBeCloseTo(Math.log2(5000), 10);
    expect(Number(values.exposure_ceiling)).toBeCloseTo(Math.log2(10000), 10);
  });

  it('publishes the column types beside the CSV (datapackage.json); codes stay strings with their zeros', async () => {
    const dir = join(audit.auditDir, 'report');
    const pkg = JSON.parse(await readFile(join(dir, 'datapackage.json'), 'utf8')) as {
      profile: string;
      resources: {
        path: string;
        profile: string;
        schema: {
          fields: { name: string; type: string; constraints?: { enum?: string[] } }[];
          missingValues: string[];
        };
      }[];
    };
    expect(pkg.profile).toBe('tabular-data-package');
    const resource = pkg.resources[0]!;
    expect(resource).toMatchObject({ path: 'report.csv', profile: 'tabular-data-resource' });
    const fields = resource.schema.fields;
    const type = Object.fromEntries(fields.map((f) => [f.name, f.type]));
    for (const code of ['code', 'shown_code', 'greedy_prefill_code', 'greedy_free_code', 'canary_id', 'run_id'])
      expect(type[code]).toBe('string');
    expect(type).toMatchObject({
      'cell.dose': 'integer',
      'cell.seed': 'integer',
      'cell.placement': 'string',
      dose: 'integer',
      rank: 'integer',
      shown_rank: 'integer',
      exposure: 'number',
      recovered_prefill: 'boolean',
    });

    // A small loader that honours the table schema (as frictionless, readr with col_types or
    // pandas with dtype= do): every value must parse as its column's type.
    const text = (await readFile(join(dir, 'report.csv'), 'utf8')).trimEnd().split('\n');
    const header = parseCsvLine(text[0] as string);
    expect(header).toEqual(fields.map((f) => f.name));
    const parse: Record<string, (v: string) => unknown> = {
      string: (v) => v,
      integer: (v) => (/^-?\d+$/.test(v) ? Number(v) : Symbol('bad')),
      number: (v) => (Number.isNaN(Number(v)) ? Symbol('bad') : Number(v)),
      boolean: (v) => (v === 'true' ? true : v === 'false' ? false : Symbol('bad')),
    };
    const rows = text.slice(1).map((line) =>
      Object.fromEntries(
        parseCsvLine(line).map((v, i) => {
          const f = fields[i]!;
          const value = resource.schema.missingValues.includes(v) ? null : (parse[f.type] as (v: string) => unknown)(v);
          expect(typeof value, `${f.name} = ${v}`).not.toBe('symbol');
          if (value !== null && f.constraints?.enum) expect(f.constraints.enum).toContain(value);
          return [f.name, value];
        }),
      ),
    );
    // f001's code is 0007: a loader guessing numbers would read 7.
    expect(rows.filter((r) => r.canary_id === 'f001').every((r) => r.code === '0007')).toBe(true);
    expect(rows.some((r) => r.greedy_prefill_code === '0007')).toBe(true);
    expect(rows.find((r) => r.canary_id === 'f001' && r.probe_kind === 'substituted')?.shown_code).toBe('5007');
    // And the CSV quotes every code, so even a type-guessing reader sees a quoted field.
    const line = text.find((l) => l.includes(',f001.hidden,')) as string;
    expect(line).toContain(',"0007",');
    expect(text.find((l) => l.includes(',f001.substituted,'))).toContain(',"5007",');
  });

  it.skipIf(!hasPandas)('loads in pandas with the documented one-liner, codes intact', async () => {
    const dir = join(audit.auditDir, 'report');
    const script = `${PANDAS_LOAD}\nprint(df.loc[df.canary_id == "f001", "code"].iloc[0], df["shown_code"].dropna().iloc[0], str(df["dose"].dtype))`;
    const out = execFileSync(trainerPython(), ['-c', script], { cwd: dir, encoding: 'utf8' }).trim().split(' ');
    expect(out[0]).toBe('0007');
    expect(out[1]).toMatch(/^\d{4}$/);
    expect(out[2]).toBe('Int64');
  });

  it('writes Markdown tables for every section', async () => {
    const md = await readFile(join(audit.auditDir, 'report', 'report.md'), 'utf8');
    for (const heading of [
      '## Exposure vs dose',
      '## Controls',
      '## Recovery',
      '## Paired comparisons',
      '## Utility',
      '## Failed or missing runs',
      '## Provenance',
    ]) {
      expect(md).toContain(heading);
    }
    expect(md).toContain('**Visibility: redacted**');
    // Columns constant in every row of both visibilities' tables (here: dose 8, the ceiling) are said once, under the last.
    expect(md).toContain(
      `| placement=late, population=single, visibility=redacted | hidden | ${EXPECTED.lateMedian.toFixed(2)} [`,
    );
    // Every redacted row rests on 2 runs: the flag beside each interval is common to the rows, so it is stated once under the table.
    expect(md).toContain(
      '_In every row of this table — Exposure median [95% CI]: ⚠ 2 runs per arm: interval may be too narrow. ',
    );
    // What both visibilities' tables repeat is said once, under the last of them; both keep one column set.
    expect(md).toContain('In every row of these 2 tables — Dose: 8. Ceiling: 13.29._');
    for (const line of md.split('\n'))
      expect(line.match(/in every row/gi)?.length ?? 0, line.slice(0, 80)).toBeLessThanOrEqual(2);
    // The exposure tables of both visibilities have one column set.
    const exposure = md.slice(md.indexOf('## Exposure vs dose'), md.indexOf('## Controls'));
    const heads = exposure.split('\n').filter((l) => l.startsWith('| Cell'));
    expect(heads).toHaveLength(2);
    expect(heads[0]).toContain('Recovered (prefill)');
    expect(heads[1]).toBe(heads[0]);
    expect(md).toContain('**placement: early → late**');
    // n canaries and n runs beside each figure, with the resampling behind its interval.
    // The late cell's median sits on its ceiling pile (3 of 6 at rank 1) and is read on the ranks; the early one is not.
    expect(md).toContain(
      '| 3 canaries · 2 runs; crossed: runs × canaries, two-way; on the ranks (values tied at the ceiling or floor) |',
    );
    expect(md).toContain('| 3 canaries · 2 runs; crossed: runs × canaries, two-way |');
    expect(md).toContain(
      '| 3 canaries · 1 run; single run: canaries only; one run: a rerun can fall outside this interval |',
    );
    expect(md).toMatch(/\| 8 \| 6 \| 3 · 2 \| 6 \| 0 \| [^\n]*\|/);
    expect(md).toContain(
      '_In every row of this table — Median paired Δ [95% CI]: crossed: run pairs × canaries, two-way._',
    );
    expect(md).toContain(
      '_In every row of this table — Median paired Δ [95% CI]: single run pair: canary pairs only; one run: a rerun can fall outside this interval._',
    );
    // Copying is read against the held-out canaries' copy rate (any record, trained on or not).
    expect(md).toContain('| Held-out recovered (prefill) | Held-out copied (prefill) |');
    expect(md).toContain(runId(5));
    expect(md).toContain('CUDA out of memory');
    expect(md).toContain('mixed_code_versions');
  });

  it('is reproducible from the seed, and the seed is what moves the intervals', async () => {
    const again = await computeReport({ auditDir: audit.auditDir, seed: 3, resamples: 400 });
    expect(JSON.parse(JSON.stringify(again.summary.groups))).toEqual(summary.groups);
    expect(JSON.parse(JSON.stringify(again.summary.paired))).toEqual(summary.paired);
    const other = await computeReport({ auditDir: audit.auditDir, seed: 4, resamples: 400 });
    const ci = (s: ReportSummary) =>
      s.groups.map((g) => [g.inserted.exposure?.lo, g.inserted.exposure?.hi, g.inserted.exposure?.se]);
    expect(ci(JSON.parse(JSON.stringify(other.summary)) as ReportSummary)).not.toEqual(ci(summary));
    expect(other.summary.groups.map((g) => g.inserted.exposure?.estimate)).toEqual(
      summary.groups.map((g) => g.inserted.exposure?.estimate),
    );
  });

  it('holds one score vector at a time while streaming', async () => {
    let alive = 0;
    let peak = 0;
    let calls = 0;
    await computeReport({
      auditDir: audit.auditDir,
      resamples: 10,
      hooks: {
        readScores: async (path, expected) => {
          alive += 1;
          calls += 1;
          peak = Math.max(peak, alive);
          try {
            return await readScoreFile(path, expected);
          } finally {
            alive -= 1;
          }
        },
      },
    });
    expect(calls).toBe(EXPECTED.observations);
    expect(peak).toBe(1);
  });

  it('writes only the formats asked for, where asked', async () => {
    const out = join(root, 'only-json');
    const result = await writeReport({ auditDir: audit.auditDir, outDir: out, formats: ['json'], resamples: 10 });
    expect(result.files).toEqual([join(out, 'summary.json')]);
    expect(result.summaryPath).toBe(join(out, 'summary.json'));
    expect(result.counts.finished).toBe(6);
  });
});
