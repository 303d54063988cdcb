/**
 * The per-backend defaults of `plan --power` (src/app/power-defaults.ts), derived from real audits:
 * every crossed median of hidden probes at the final checkpoint in each audit's report
 * (summary.json) gives per-unit standard deviations (`sdOfComponents`: run, canary, run × canary,
 * in bits); arms (focal inserted and held-out medians) and paired differences (focal) are pooled
 * separately, as root mean squares, per audit and over all the audits given.
 *
 *   npx tsx bench/power-defaults.ts AUDIT_DIR [AUDIT_DIR ...]
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pooledSd, type ComponentSd } from '../src/app/power-defaults.js';
import type { VarianceComponents } from '../src/metrics/bootstrap.js';

interface Summary {
  audit: { id: string; name?: string };
  provenance?: { git_commit?: string | null; runs?: unknown };
  groups: {
    cohort: string;
    phase: string;
    probe_kind: string;
    inserted: { exposure: { components?: VarianceComponents[] } | null };
    controls: { held_out: { exposure: { components?: VarianceComponents[] } | null } | null };
  }[];
  paired: { cohort: string; phase: string; probe_kind: string; difference: { components?: VarianceComponents[] } }[];
}

const dirs = process.argv.slice(2);
if (dirs.length === 0 || dirs.includes('--help') || dirs.includes('-h')) {
  process.stdout.write(`usage: npx tsx bench/power-defaults.ts AUDIT_DIR [AUDIT_DIR ...]
Per audit and pooled: per-unit sds (bits) of run, canary and run x canary, from the variance components of
each audit's report/summary.json (hidden probes, final checkpoint; arms: focal inserted and held-out
medians; paired: focal paired differences). These are plan --power's defaults per backend.
`);
  process.exit(dirs.length === 0 ? 2 : 0);
}

const main = (c: { cohort: string; phase: string; probe_kind: string }): boolean =>
  c.phase === 'final' && c.probe_kind === 'hidden';
const fmt = (p: { sd: ComponentSd; n: number } | null): string =>
  p ? `${p.sd.run.toFixed(2)} | ${p.sd.canary.toFixed(2)} | ${p.sd.interaction.toFixed(2)} | ${p.n}` : '— | — | — | 0';

const allArms: VarianceComponents[] = [];
const allPaired: VarianceComponents[] = [];
process.stdout.write(
  '| audit | arm sd: run | canary | run × canary | medians | paired sd: run | canary | run × canary | differences |\n|---|---|---|---|---|---|---|---|---|\n',
);
for (const dir of dirs) {
  const s = JSON.parse(readFileSync(join(dir, 'report', 'summary.json'), 'utf8')) as Summary;
  const arms = s.groups
    .filter((g) => main(g))
    .flatMap((g) => [
      ...(g.cohort === 'focal' ? (g.inserted.exposure?.components ?? []) : []),
      ...(g.cohort === 'focal' ? (g.controls.held_out?.exposure?.components ?? []) : []),
    ]);
  const paired = s.paired.filter((p) => main(p) && p.cohort === 'focal').flatMap((p) => p.difference.components ?? []);
  allArms.push(...arms);
  allPaired.push(...paired);
  process.stdout.write(`| ${s.audit.name ?? ''} ${s.audit.id} | ${fmt(pooledSd(arms))} | ${fmt(pooledSd(paired))} |\n`);
}
process.stdout.write(`| pooled | ${fmt(pooledSd(allArms))} | ${fmt(pooledSd(allPaired))} |\n`);
const json = { arm: pooledSd(allArms), paired: pooledSd(allPaired) };
process.stdout.write(`${JSON.stringify(json)}\n`);
