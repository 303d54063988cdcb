import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { extrapolatedExposure } from '../../src/metrics/exposure-extrapolation.js';
import { normalCdf, normalPpf } from '../../src/metrics/gaussian.js';
import { buildDocument } from '../../src/report/document.js';
import { computeReport, type ComputedReport } from '../../src/report/index.js';
import { renderMarkdown } from '../../src/report/markdown.js';
import { readScoreFile } from '../../src/report/scores.js';
import { validate } from '../../src/schemas/index.js';
import { buildFixtureAudit, type FixtureAudit, type FixtureRun } from '../fixtures/audit-builder.js';

/**
 * Three designs on two seeds (codes at dose 16, the others at dose 4), three inserted and three held-out canaries per run: `codes` on the
 * exhaustive space, `rare-tokens` and `sampled-text` on 199 sampled decoys. The reader below
 * replaces the fixture's sampled scores with ones whose answer is known:
 * - rare-tokens: the decoys are the 199 normal quantiles of N(−20, 1), an inserted secret sits at
 *   z = 4, 4.5, 5 (median 4.5: −log2 P(Z ≥ 4.5) = 18.17 bits, ceiling log2 200 = 7.64), a held-out
 *   one at z = −0.5, 0, 0.5 (median 0: 1 bit);
 * - sampled-text: the decoys are two tight clusters 8 sd apart, which no skew-normal fits, and the
 *   secret scores 22 above the upper one: its fit is flagged above the ceiling, so withheld.
 */
const DECOYS = 199;
const MU = -20;
const INSERTED_Z = [4, 4.5, 5];
const HELD_OUT_Z = [-0.5, 0, 0.5];
const normalDecoys = Float64Array.from({ length: DECOYS }, (_, k) => MU + normalPpf((k + 0.5) / DECOYS));
const bimodalDecoys = Float64Array.from(
  { length: DECOYS },
  (_, k) => MU + (k % 2 === 0 ? 0 : 8) + 0.1 * normalPpf((Math.floor(k / 2) + 0.5) / 100),
);

let root: string;
let audit: FixtureAudit;
let on: ComputedReport;
let off: ComputedReport;

const known: typeof readScoreFile = async (path, expected) => {
  const scores = await readScoreFile(path, expected);
  const run = audit.runs.find((r) => path.startsWith(r.dir));
  const design = run?.spec.cell.design;
  if (design === 'codes') return scores;
  // The fixture gives the true code −5 and every decoy −20 (rank 1): put the known scores in their place.
  const trueIndex = scores.indexOf(-5);
  const [canary] = basename(path).split('.') as [string];
  const j = Number(canary.slice(1));
  const decoys = design === 'rare-tokens' ? normalDecoys : bimodalDecoys;
  // sampled-text: 22 above the upper cluster, so far out that the fit reads it above the ceiling.
  const z = (design === 'rare-tokens' ? 0 : 30) + ((canary.startsWith('f') ? INSERTED_Z[j] : HELD_OUT_Z[j]) as number);
  const out = new Float32Array(scores.length);
  for (let i = 0, k = 0; i < out.length; i += 1) out[i] = i === trueIndex ? MU + z : (decoys[k++] as number);
  return out;
};

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'designs-extrapolation-'));
  const runs: FixtureRun[] = [];
  for (const design of ['codes', 'rare-tokens', 'sampled-text'])
    for (const seed of [0, 1])
      runs.push({
        // codes at another dose: no comparison pairs an exhaustive with a sampled space.
        cell: { dose: design === 'codes' ? 16 : 4, design, seed },
        canaries: INSERTED_Z.map((_, j) => ({
          id: `f00${j}`,
          code: String(4821 + 97 * j),
          dose: design === 'codes' ? 16 : 4,
        })),
        heldOut: HELD_OUT_Z.map((_, j) => ({ id: `h00${j}`, code: String(1234 + 89 * j) })),
        ...(design === 'codes' ? {} : { space: { kind: 'sampled' as const, decoys: DECOYS } }),
      });
  audit = await buildFixtureAudit(join(root, 'x'), {
    name: 'designs-extrapolation',
    runs,
    outcome: (c) => (c.canary.inserted ? { rank: 1 } : { rank: 3 }),
  });
  const options = { auditDir: audit.auditDir, resamples: 50, hooks: { readScores: known } };
  [on, off] = await Promise.all([computeReport({ ...options, extrapolate: true }), computeReport(options)]);
});
afterAll(() => rm(root, { recursive: true, force: true }));

function row(report: ComputedReport, design: string) {
  const r = report.summary.canary_designs?.rows.find((x) => x.design === design);
  if (!r) throw new Error(`no row for ${design}`);
  return r;
}

describe('extrapolated exposure in the canary designs section', () => {
  it('reads a secret at z = 4.5 above normal decoys at its known tail, beyond the rank ceiling', () => {
    const r = row(on, 'rare-tokens');
    const x = r.extrapolated;
    const ceiling = Math.log2(DECOYS + 1);
    expect(x?.rank_ceiling).toBeCloseTo(ceiling, 12);
    // Rank 1 in every run: the rank exposure is stuck at the ceiling.
    expect(r.exposure?.estimate).toBeCloseTo(ceiling, 12);
    expect(x?.inserted).toMatchObject({ n: 6, ok: 6, flagged: 0, withheld: 0, unfit: 0, above_ceiling: 6 });
    const truth = -Math.log2(1 - normalCdf(4.5));
    expect(truth).toBeCloseTo(18.17, 2);
    // The median probe is z = 4.5 in both runs: exactly the per-probe reading of that probe.
    const single = extrapolatedExposure(Math.fround(MU + 4.5), Float64Array.from(Float32Array.from(normalDecoys)));
    expect(x?.inserted.exposure?.estimate).toBe(single.exposure);
    // Fitted from 199 decoys, 4.5 sd out: within half a bit of the true tail.
    expect(Math.abs((x?.inserted.exposure?.estimate as number) - truth)).toBeLessThan(0.5);
    // The interval is the section's: crossed over the two seeds and three canaries.
    expect(x?.inserted.exposure).toMatchObject({ n: 6, n_clusters: 2 });
    expect(x?.inserted.exposure?.lo).toBeLessThanOrEqual(x?.inserted.exposure?.estimate as number);
    expect(x?.inserted.exposure?.hi).toBeGreaterThanOrEqual(x?.inserted.exposure?.estimate as number);
    // Held out at z = 0: one bit, inside the ceiling.
    expect(x?.held_out?.n).toBe(6);
    expect(x?.held_out?.above_ceiling).toBe(0);
    expect(Math.abs((x?.held_out?.exposure?.estimate as number) - 1)).toBeLessThan(0.1);
  });

  it('withholds a poor fit instead of showing it above the ceiling', () => {
    const x = row(on, 'sampled-text').extrapolated;
    expect(x?.inserted).toMatchObject({ n: 6, ok: 0, withheld: 6, above_ceiling: 0 });
    // The withheld probes enter at their rank exposure: the ceiling, not the fitted tail.
    expect(x?.inserted.exposure?.estimate).toBeCloseTo(Math.log2(DECOYS + 1), 12);
    expect(x?.inserted.exposure?.hi).toBeLessThanOrEqual(Math.log2(DECOYS + 1) + 1e-12);
  });

  it('leaves the exhaustive design out and renders the table beside the rank exposure', () => {
    expect(row(on, 'codes')).not.toHaveProperty('extrapolated');
    expect(validate('report', JSON.parse(JSON.stringify(on.summary)))).toEqual([]);
    const md = renderMarkdown(buildDocument(on.summary));
    expect(md).toContain('Extrapolated exposure by design (sampled spaces)');
    // One row per sampled design (the compact table moves columns equal in every row below it).
    expect(md).toMatch(/\| rare-tokens \| 18\.\d\d \[[^\]]+\] \| 1\.0\d [^|]*\| 6 · 0 · 0 · 0 of 6 \| 6 of 6 \|/);
    expect(md).toMatch(/\| sampled-text \| 7\.64 \[[^\]]+\] \| [^|]*\| 0 · 0 · 6 · 0 of 6 \| 0 of 6 \|/);
    expect(md).toMatch(/Dose: 4\. Rank ceiling: 7\.64\./);
    expect(md).not.toContain('--extrapolate');
  });

  it('without --extrapolate says how to turn it on, with null per sampled design', () => {
    expect(row(off, 'rare-tokens').extrapolated).toBeNull();
    expect(row(off, 'sampled-text').extrapolated).toBeNull();
    expect(row(off, 'codes')).not.toHaveProperty('extrapolated');
    const md = renderMarkdown(buildDocument(off.summary));
    expect(md).not.toContain('Extrapolated exposure by design');
    expect(md).toContain(
      "Extrapolated exposure (beyond the rank ceiling of the sampled designs: rare-tokens, sampled-text) was not computed: run `canary-audit report AUDIT --extrapolate` or set the grid's `analysis.extrapolate: true`",
    );
  });
});
