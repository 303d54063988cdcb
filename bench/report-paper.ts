/**
 * `report` on a paper-size audit, measured side by side: the report as it is (each bootstrap
 * resample only counts the ranks it drew and reads its median off the counts), the same report
 * copying each resample and using quickselect, the same report sorting each resample (the
 * previous method) — all three give the same intervals — and the I/O floor: read and sha256 every
 * score file with the system calls the report makes (synchronous open, fstat, read into one
 * reused buffer, close), which is what any report must do. Each is printed as a ratio to the floor. The
 * same files read asynchronously (`fs/promises` readFile, a fresh Buffer each: the floor this bench
 * used to print) are printed beside it. The five (floor, async reads, three reports) alternate --repeats
 * times (the order reversing every repeat), after one warm-up of each; every figure is the median
 * with its min-max, in wall seconds and in the process's CPU seconds (user + system: on a machine
 * shared with other jobs the steadier measure), and each ratio's spread is min/max to max/min. Goal: ≤ 10 s for the paper-size
 * audit on 2 cores.
 *
 *   npx tsx bench/report-paper.ts [--runs 33] [--canaries 64] [--resamples 2000] [--repeats 3] [--keep DIR]
 *
 * The default audit has the shape of configs/paper-email.yaml: 33 runs (4 visibilities × 8 doses
 * + 1), 64 focal and 64 held-out canaries per run, hidden, supplied and substituted probes, base
 * and final phases, exhaustive 10,000 candidates: 25,344 score files, 1 GB. Building it takes a
 * few minutes and 1 GB of temporary disk.
 */
import { createHash } from 'node:crypto';
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '33' },
    canaries: { type: 'string', default: '64' },
    resamples: { type: 'string', default: '2000' },
    repeats: { type: 'string', default: '3' },
    keep: { type: 'string' },
  },
});
process.env.CANARY_AUDIT_LOG_LEVEL ??= 'warn';
const { computeReport } = await import('../src/report/index.js');
const { buildFixtureAudit } = await import('../test/fixtures/audit-builder.js');

const runs = Number(values.runs);
const canaries = Number(values.canaries);
const resamples = Number(values.resamples);
const repeats = Number(values.repeats);
const root = values.keep ?? (await mkdtemp(join(tmpdir(), 'ca-report-paper-')));

async function scoreFiles(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile() && entry.name.endsWith('.f32')) out.push(join(entry.parentPath, entry.name));
  }
  return out.sort();
}

async function timed<T>(fn: () => Promise<T> | T): Promise<[number, T]> {
  const t = performance.now();
  const value = await fn();
  return [(performance.now() - t) / 1000, value];
}

/** Wall seconds, CPU seconds of this process (user + system) and fn's value. */
async function timedCpu<T>(fn: () => Promise<T> | T): Promise<[number, number, T]> {
  const c = process.cpuUsage();
  const [wall, value] = await timed(fn);
  const used = process.cpuUsage(c);
  return [wall, (used.user + used.system) / 1e6, value];
}

const median = (v: number[]): number => {
  const s = [...v].sort((x, y) => x - y);
  const m = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
};

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

  // I/O floor: what any report must do, with the report's own system calls (src/report/scores.ts):
  // open, fstat, read into one reused buffer, close, sha256.
  let buffer = Buffer.allocUnsafeSlow(40001);
  const readAndHash = (): void => {
    for (const f of files) {
      const fd = openSync(f, 'r');
      let at = 0;
      try {
        const size = fstatSync(fd).size;
        if (buffer.length < size + 1) buffer = Buffer.allocUnsafeSlow(size + 1);
        for (let got = 1; got > 0 && at < size + 1; at += got) got = readSync(fd, buffer, at, size + 1 - at, at);
      } finally {
        closeSync(fd);
      }
      createHash('sha256').update(buffer.subarray(0, at)).digest('hex');
    }
  };
  // The same files read asynchronously, a fresh Buffer each (the floor this bench used to print).
  const readAsyncAndHash = async (): Promise<void> => {
    for (const f of files)
      createHash('sha256')
        .update(await readFile(f))
        .digest('hex');
  };
  const report = (median: 'count' | 'select' | 'sort') =>
    computeReport({ auditDir: audit.auditDir, resamples, median });
  // Warm-ups (page cache, schema compiler, JIT), then every form once per repeat, the order
  // reversing each repeat, so a slow spell of a shared machine falls on all of them alike.
  readAndHash();
  await readAsyncAndHash();
  await computeReport({ auditDir: audit.auditDir, resamples: 50 });
  const forms = ['floor', 'async', 'count', 'select', 'sort'] as const;
  type Form = (typeof forms)[number];
  const times: Record<'wall' | 'cpu', Record<Form, number[]>> = {
    wall: { floor: [], async: [], count: [], select: [], sort: [] },
    cpu: { floor: [], async: [], count: [], select: [], sort: [] },
  };
  let a: Awaited<ReturnType<typeof report>> | undefined;
  let b: Awaited<ReturnType<typeof report>> | undefined;
  for (let r = 0; r < repeats; r += 1) {
    for (const form of r % 2 === 0 ? forms : [...forms].reverse()) {
      const [wall, cpu, value] = await timedCpu<unknown>(() =>
        form === 'floor' ? readAndHash() : form === 'async' ? readAsyncAndHash() : report(form),
      );
      times.wall[form].push(wall);
      times.cpu[form].push(cpu);
      if (form === 'count') a = value as Awaited<ReturnType<typeof report>>;
      if (form === 'sort') b = value as Awaited<ReturnType<typeof report>>;
    }
  }
  if (a === undefined || b === undefined) throw new Error('--repeats must be at least 1');
  const same =
    JSON.stringify([a.summary.groups, a.summary.paired]) === JSON.stringify([b.summary.groups, b.summary.paired]);
  const intervals = a.summary.groups.length * 7 + a.summary.paired.length;
  const figure = (form: Form, clock: 'wall' | 'cpu'): string => {
    const v = times[clock][form];
    const floor = times[clock].floor;
    const ratio = (median(v) / median(floor)).toFixed(2);
    const lo = (Math.min(...v) / Math.max(...floor)).toFixed(2);
    const hi = (Math.max(...v) / Math.min(...floor)).toFixed(2);
    const spread = `${Math.min(...v).toFixed(2)}-${Math.max(...v).toFixed(2)}`;
    return `${clock} ${median(v).toFixed(2)} s (${spread})${form === 'floor' ? '' : `, ${ratio} x floor (${lo}-${hi})`}`;
  };
  const line = (label: string, form: Form, what: string): string =>
    `${label.padEnd(11)} ${figure(form, 'wall')}; ${figure(form, 'cpu')}   ${what}\n`;
  process.stdout.write(line('report', 'count', 'counting draws per rank (the default)'));
  process.stdout.write(line('quickselect', 'select', 'copying each resample and selecting'));
  process.stdout.write(line('sorting', 'sort', 'sorting each resample'));
  process.stdout.write(line('async reads', 'async', 'read (fs/promises readFile) and sha256 every score file'));
  process.stdout.write(line('I/O floor', 'floor', 'read (open, fstat, readSync, close) and sha256 every score file'));
  process.stdout.write(
    `speed-up    ${(median(times.wall.sort) / median(times.wall.count)).toFixed(2)} x wall (sorting / report); same intervals: ${same}; ${a.summary.groups.length} groups, ${a.summary.paired.length} paired comparisons (≈ ${intervals} bootstrap intervals of ${resamples} resamples); ${repeats} repeats, medians (min-max), CPU = this process's user + system seconds\n`,
  );
  process.stdout.write(`peak RSS    ${(process.resourceUsage().maxRSS / 1024).toFixed(0)} MiB\n`);
} finally {
  if (values.keep === undefined) await rm(root, { recursive: true, force: true });
}
