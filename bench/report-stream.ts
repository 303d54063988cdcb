/**
 * Report memory and speed, measured side by side on fixture audits of growing size.
 *
 *   node --expose-gc --import tsx bench/report-stream.ts [runs=8,32] [canaries=16]
 *
 * For each audit size it prints:
 * - memory: peak live memory (heap + array buffers, sampled after a GC at every score read) above
 *   the starting point while `computeReport` streams the score files, against a baseline that holds every score vector of the audit (what a reader that
 *   loads results whole would hold); the ratio shows memory does not follow the score volume;
 * - time: `computeReport` (verify, rank, aggregate, bootstrap) against the baseline of only
 *   reading and hashing the same score files; each the fastest of 3 runs after a warm-up.
 */
import { createHash } from 'node:crypto';
import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { computeReport } from '../src/report/index.js';
import { readScoreFile } from '../src/report/scores.js';
import { buildFixtureAudit } from '../test/fixtures/audit-builder.js';

const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) {
  process.stderr.write('run with: node --expose-gc --import tsx bench/report-stream.ts\n');
  process.exit(2);
}
const sizes = (process.argv[2] ?? '8,32').split(',').map(Number);
const canaryCount = Number(process.argv[3] ?? 16);

/** Fastest of REPEATS timed calls after one warm-up: the least disturbed by other processes. */
const REPEATS = 3;
async function fastest(fn: () => Promise<unknown>): Promise<number> {
  await fn();
  let best = Infinity;
  for (let i = 0; i < REPEATS; i += 1) {
    const t = performance.now();
    await fn();
    best = Math.min(best, performance.now() - t);
  }
  return best;
}

function used(): number {
  const m = process.memoryUsage();
  return m.heapUsed + m.arrayBuffers;
}

async function scoreFiles(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile() && entry.name.endsWith('.f32')) out.push(join(entry.parentPath, entry.name));
  }
  return out.sort();
}

const root = await mkdtemp(join(tmpdir(), 'ca-bench-'));
try {
  const mb = (b: number): string => `${(Math.max(0, b) / 2 ** 20).toFixed(2)} MB`;
  for (const runs of sizes) {
    const focal = Array.from({ length: canaryCount }, (_, i) => ({
      id: `f${String(i).padStart(3, '0')}`,
      code: String((i * 613 + 17) % 10000).padStart(4, '0'),
      dose: 8,
    }));
    const held = Array.from({ length: canaryCount }, (_, i) => ({
      id: `h${String(i).padStart(3, '0')}`,
      code: String((i * 397 + 5003) % 10000).padStart(4, '0'),
    }));
    const audit = await buildFixtureAudit(join(root, String(runs)), {
      name: `bench-${runs}`,
      runs: Array.from({ length: runs }, (_, r) => ({
        cell: { placement: r % 2 === 0 ? 'early' : 'late', seed: Math.floor(r / 2) },
        canaries: focal,
        heldOut: held,
      })),
      outcome: (c) => ({
        rank: c.canary.inserted
          ? 1 + ((c.runIndex * 31 + Number(c.canary.code)) % 64)
          : 1 + (Number(c.canary.code) % 5000),
      }),
    });
    const files = await scoreFiles(audit.auditDir);
    const bytes = files.length * 40000;

    // Time baseline: read and hash every score file (the I/O any report must do), warmed once.
    const readAndHash = async (keep: Float32Array[] | null): Promise<void> => {
      for (const f of files) {
        const b = await readFile(f);
        createHash('sha256').update(b).digest('hex');
        keep?.push(new Float32Array(b.buffer, b.byteOffset, b.byteLength / 4));
      }
    };
    const baselineMs = await fastest(() => readAndHash(null));

    // Memory baseline: the same vectors all held at once (a whole-audit reader).
    gc();
    const base0 = used();
    const all: Float32Array[] = [];
    await readAndHash(all);
    gc();
    const baselineBytes = used() - base0;
    all.length = 0;

    // Streamed report, timed on its own (the first call also warms the schema compiler).
    const reportMs = await fastest(() => computeReport({ auditDir: audit.auditDir, resamples: 2000 }));

    // Then memory: sample live memory after every score read.
    gc();
    const start = used();
    let peak = 0;
    let reads = 0;
    const { summary } = await computeReport({
      auditDir: audit.auditDir,
      resamples: 2000,
      hooks: {
        readScores: async (path, expected) => {
          const v = await readScoreFile(path, expected);
          // Live memory only: collect garbage before sampling, every 16th read (a GC per read
          // would dominate the bench); the vector just read is alive at that moment.
          reads += 1;
          if (reads % 16 === 0) {
            gc();
            peak = Math.max(peak, used() - start);
          }
          return v;
        },
      },
    });
    process.stdout.write(
      `${runs} runs, ${files.length} score files (${mb(bytes)}): ` +
        `memory streamed peak ${mb(peak)} vs all-scores baseline ${mb(baselineBytes)} (ratio ${(peak / baselineBytes).toFixed(3)}); ` +
        `time report ${reportMs.toFixed(0)} ms vs read+hash baseline ${baselineMs.toFixed(0)} ms (ratio ${(reportMs / baselineMs).toFixed(2)}); ` +
        `${summary.groups.length} groups, ${summary.paired.length} paired comparisons\n`,
    );
    await rm(join(root, String(runs)), { recursive: true, force: true });
  }
} finally {
  await rm(root, { recursive: true, force: true });
}
