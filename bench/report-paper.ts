/**
 * `report` on a paper-size audit, measured side by side: the report as it is (each bootstrap
 * resample only counts the ranks it drew and reads its median off the counts), the same report
 * copying each resample and using quickselect, the same report sorting each resample (the
 * previous method) — all three give the same intervals — and the I/O floor (read and sha256 every
 * score file). Each is printed as a ratio to the floor. Goal: ≤ 10 s for the paper-size audit on
 * 2 cores.
 *
 *   npx tsx bench/report-paper.ts [--runs 33] [--canaries 64] [--resamples 2000] [--keep DIR]
 *
 * The default audit has the shape of configs/paper-email.yaml: 33 runs (4 visibilities × 8 doses
 * + 1), 64 focal and 64 held-out canaries per run, hidden, supplied and substituted probes, base
 * and final phases, exhaustive 10,000 candidates: 25,344 score files, 1 GB. Building it takes a
 * few minutes and 1 GB of temporary disk.
 */
import { createHash } from 'node:crypto';
import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '33' },
    canaries: { type: 'string', default: '64' },
    resamples: { type: 'string', default: '2000' },
    keep: { type: 'string' },
  },
});
process.env.CANARY_AUDIT_LOG_LEVEL ??= 'warn';
const { computeReport } = await import('../src/report/index.js');
const { buildFixtureAudit } = await import('../test/fixtures/audit-builder.js');

const runs = Number(values.runs);
const canaries = Number(values.canaries);
const resamples = Number(values.resamples);
const root = values.keep ?? (await mkdtemp(join(tmpdir(), 'ca-report-paper-')));

async function scoreFiles(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile() && entry.name.endsWith('.f32')) out.push(join(entry.parentPath, entry.name));
  }
  return out.sort();
}

async function timed<T>(fn: () => Promise<T>): Promise<[number, T]> {
  const t = performance.now();
  const value = await fn();
  return [(performance.now() - t) / 1000, value];
}

try {
  const visibilities = ['visible', 'redacted', 'encoded:binary', 'encoded:chained-fruit'];
  const doses = [1, 2, 4, 8, 16, 32, 64, 128];
  const code = (i: number, salt: number): string => String((i * 613 + salt) % 10000).padStart(4, '0');
  const focal = (dose: number) =>
    Array.from({ length: canaries }, (_, i) => ({ id: `f${String(i).padStart(3, '0')}`, code: code(i, 17), dose }));
  const held = Array.from({ length: canaries }, (_, i) => ({
    id: `h${String(i).padStart(3, '0')}`,
    code: code(i, 5003),
  }));
  const [buildS, audit] = await timed(() =>
    buildFixtureAudit(join(root, 'audit'), {
      name: `paper-size-${runs}`,
      runs: Array.from({ length: runs }, (_, r) => {
        const visibility = visibilities[r % 4] as string;
        const dose = doses[Math.floor(r / 4) % doses.length] as number;
        return {
          cell: { visibility, dose, seed: Math.floor(r / 32) },
          canaries: focal(dose).map((c) => ({ ...c, visibility })),
          heldOut: held,
          kinds: ['hidden', 'supplied', 'substituted'],
          phases: ['base', 'final'],
        };
      }),
      // Ranks vary by canary and by run (held-out canaries too), as in a real audit.
      outcome: (c) => {
        const k = Number(c.canary.code) + c.runIndex * 7919;
        if (c.phase === 'base') return { rank: 1 + (k % 9000) };
        return {
          rank: c.canary.inserted ? 1 + ((c.runIndex * 31 + Number(c.canary.code)) % 64) : 1 + ((k * 13) % 8000),
        };
      },
    }),
  );
  const files = await scoreFiles(audit.auditDir);
  const gb = (files.length * 40000) / 1e9;
  process.stdout.write(
    `audit       ${runs} runs x ${canaries}+${canaries} canaries x 3 probes x 2 phases: ${files.length} score files (${gb.toFixed(2)} GB), built in ${buildS.toFixed(0)} s\n`,
  );

  // I/O floor: read and hash every score file (what any report must do), after one warm read.
  const readAndHash = async (): Promise<void> => {
    for (const f of files)
      createHash('sha256')
        .update(await readFile(f))
        .digest('hex');
  };
  await readAndHash();
  const [floorS] = await timed(readAndHash);
  // A warm-up report (schema compiler, JIT), then each method twice, interleaved; the faster of
  // its two runs counts (the least disturbed by other processes on a shared machine).
  await computeReport({ auditDir: audit.auditDir, resamples: 50 });
  const run = (median: 'count' | 'select' | 'sort') =>
    timed(() => computeReport({ auditDir: audit.auditDir, resamples, median }));
  let [countS, a] = await run('count');
  let [selectS] = await run('select');
  let [sortS, b] = await run('sort');
  countS = Math.min(countS, (await run('count'))[0]);
  selectS = Math.min(selectS, (await run('select'))[0]);
  sortS = Math.min(sortS, (await run('sort'))[0]);
  const same =
    JSON.stringify([a.summary.groups, a.summary.paired]) === JSON.stringify([b.summary.groups, b.summary.paired]);
  const intervals = a.summary.groups.length * 7 + a.summary.paired.length;
  process.stdout.write(
    `report      ${countS.toFixed(1)} s counting draws per rank (the default)   ratio ${(countS / floorS).toFixed(2)} x I/O floor\n`,
  );
  process.stdout.write(
    `quickselect ${selectS.toFixed(1)} s copying each resample and selecting   ratio ${(selectS / floorS).toFixed(2)} x I/O floor\n`,
  );
  process.stdout.write(
    `sorting     ${sortS.toFixed(1)} s sorting each resample   ratio ${(sortS / floorS).toFixed(2)} x I/O floor\n`,
  );
  process.stdout.write(`I/O floor   ${floorS.toFixed(1)} s to read and sha256 every score file\n`);
  process.stdout.write(
    `speed-up    ${(sortS / countS).toFixed(2)} x (sorting / report); same intervals: ${same}; ${a.summary.groups.length} groups, ${a.summary.paired.length} paired comparisons (≈ ${intervals} bootstrap intervals of ${resamples} resamples)\n`,
  );
  process.stdout.write(`peak RSS    ${(process.resourceUsage().maxRSS / 1024).toFixed(0)} MiB\n`);
} finally {
  if (values.keep === undefined) await rm(root, { recursive: true, force: true });
}
