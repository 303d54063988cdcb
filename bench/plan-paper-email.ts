/**
 * `plan --out` at the speed of its I/O. Builds every manifest of configs/paper-email.yaml (33 runs
 * x 66,176 rows) and prints, side by side on the same disk:
 *
 *   plan --out   the command as a user runs it (`node dist/cli/main.js plan GRID --out DIR
 *                --no-pin-revisions`, a child process: Node's start-up, module loading, schema
 *                compilation, the write and its summary table); needs `npm run build`;
 *   writeAudit   the writer as it is, in this process: background rows generated once per task and
 *                each run's canary rows spliced in, utility rows hard-linked, one provenance stamp
 *                per write;
 *   I/O floor    the very same bytes (one written run's rows.jsonl, held in memory as one Buffer),
 *                once per run, 8 runs at once as writeAudit writes them: sha256 and write in 1 MiB
 *                chunks, fsync, close. The least any writer of these rows does (an earlier floor
 *                re-joined the lines through writeLines one run after another: more CPU and more
 *                wall time than writeAudit itself, so no floor);
 *   per-run      the previous writer's work for the same runs: every run regenerates its whole
 *                row sequence (background included) and its utility rows, and stamps provenance
 *                (two git calls and a hash of the source tree) per run. Once, in the first repeat
 *                (it takes minutes); --no-per-run leaves it out.
 *
 * plan --out, writeAudit and the floor alternate --repeats times (the order reversing every
 * repeat), each write into a fresh folder removed after it. Every figure is the median (min-max)
 * in wall seconds and in CPU seconds (user + system; the child's for plan --out), and each is
 * printed as a ratio to the I/O floor with its spread (min/max to max/min). Goal: writeAudit ≤ 10 s
 * on 2 cores.
 *
 *   npx tsx bench/plan-paper-email.ts [--grid configs/paper-email.yaml] [--repeats 3] [--no-per-run] [--out DIR]
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { mkdir, open, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

const { values } = parseArgs({
  options: {
    grid: { type: 'string', default: 'configs/paper-email.yaml' },
    out: { type: 'string' },
    repeats: { type: 'string', default: '3' },
    'no-per-run': { type: 'boolean' },
  },
});
// Before the logger is created (it reads the level once): one line per run would drown the figures.
process.env.CANARY_AUDIT_LOG_LEVEL ??= 'warn';
const { planAudit, writeAudit, writeLines, trainingRowLines, utilityRowLines, runRenderer, buildManifestCore } =
  await import('../src/manifest/index.js');
const { finishProvenance } = await import('../src/provenance/index.js');

const grid = values.grid as string;
const repeats = Number(values.repeats);
const perRun = values['no-per-run'] !== true;
const cli = join(import.meta.dirname, '..', 'dist', 'cli', 'main.js');
if (!existsSync(cli))
  throw new Error(`${cli} is missing: run \`npm run build\` first (plan --out is timed as a user runs it)`);
const out = values.out ?? mkdtempSync(join(tmpdir(), 'canary-bench-'));
const fmt = (x: number): string => Math.round(x).toLocaleString('en-US');
const median = (v: number[]): number => {
  const s = [...v].sort((x, y) => x - y);
  const m = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
};

/** CPU seconds (user + system) of this process's waited-for children, from /proc (Linux). */
function childCpu(): number {
  const stat = readFileSync('/proc/self/stat', 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[13]) + Number(fields[14])) / 100; // cutime, cstime in clock ticks (USER_HZ 100)
}

/** [wall, CPU] seconds of fn: this process's CPU plus its children's. */
async function timed(fn: () => Promise<unknown> | unknown): Promise<[number, number]> {
  const c0 = process.cpuUsage();
  const k0 = childCpu();
  const t0 = performance.now();
  await fn();
  const wall = (performance.now() - t0) / 1000;
  const used = process.cpuUsage(c0);
  return [wall, (used.user + used.system) / 1e6 + childCpu() - k0];
}

try {
  const t0 = performance.now();
  const plan = await planAudit(grid);
  const planSeconds = (performance.now() - t0) / 1000;
  const rows = plan.runs.length * plan.grid.rows;
  // One write first: its rows are the floor's bytes, its peak RSS is what planning itself needs.
  const first = await writeAudit(plan, join(out, 'first'));
  const peak = process.resourceUsage().maxRSS / 1024;
  const sample = readFileSync(join(first.runs[0]?.runDir ?? '', 'rows.jsonl'));
  const sampleRows = sample.toString('utf8').split('\n').length - 1;
  rmSync(join(out, 'first'), { recursive: true, force: true });

  const forms = ['cli', 'writeAudit', 'floor'] as const;
  type Form = (typeof forms)[number] | 'perRun';
  const wall: Record<Form, number[]> = { cli: [], writeAudit: [], floor: [], perRun: [] };
  const cpu: Record<Form, number[]> = { cli: [], writeAudit: [], floor: [], perRun: [] };
  const run: Record<Form, (dir: string) => Promise<unknown> | unknown> = {
    cli: (dir) => {
      const child = spawnSync(process.execPath, [cli, 'plan', grid, '--out', dir, '--no-pin-revisions'], {
        encoding: 'utf8',
        env: { ...process.env, CANARY_AUDIT_LOG_LEVEL: 'warn' },
      });
      if (child.status !== 0) throw new Error(`plan --out exited ${child.status}: ${child.stderr}`);
    },
    // planAudit included, as the command does it.
    writeAudit: async (dir) => writeAudit(await planAudit(grid), dir),
    floor: async (dir) => {
      await mkdir(dir, { recursive: true });
      let next = 0;
      const lane = async (): Promise<void> => {
        for (let r = next++; r < plan.runs.length; r = next++) {
          const path = join(dir, `rows-${r}.jsonl`);
          const hash = createHash('sha256');
          const handle = await open(path, 'w');
          try {
            for (let at = 0; at < sample.length; at += 1 << 20) {
              const chunk = sample.subarray(at, at + (1 << 20));
              hash.update(chunk);
              await handle.write(chunk);
            }
            await handle.sync();
          } finally {
            await handle.close();
          }
          hash.digest('hex');
          await rm(path);
        }
      };
      await Promise.all(Array.from({ length: Math.min(8, plan.runs.length) }, lane));
    },
    perRun: async (dir) => {
      const p = await planAudit(grid);
      await mkdir(dir, { recursive: true });
      for (const [k, layout] of p.runs.entries()) {
        const renderer = runRenderer(p.grid, layout);
        buildManifestCore(p.grid, p.auditId, p.pool, layout);
        await writeLines(join(dir, `rows-${k}.jsonl`), trainingRowLines(p.grid, p.pool, layout, renderer));
        await writeLines(join(dir, `utility-${k}.jsonl`), utilityRowLines(p.grid, p.pool, renderer));
        finishProvenance(p.startStamp);
        rmSync(join(dir, `rows-${k}.jsonl`));
        rmSync(join(dir, `utility-${k}.jsonl`));
      }
    },
  };
  for (let r = 0; r < repeats; r += 1) {
    const order: Form[] = r % 2 === 0 ? [...forms] : [...forms].reverse();
    if (r === 0 && perRun) order.push('perRun');
    for (const form of order) {
      const dir = join(out, `${form}-${r}`);
      const [w, c] = await timed(() => run[form](dir));
      wall[form].push(w);
      cpu[form].push(c);
      rmSync(dir, { recursive: true, force: true });
    }
  }

  const figure = (form: Form, clock: 'wall' | 'cpu'): string => {
    const v = (clock === 'wall' ? wall : cpu)[form];
    const floor = (clock === 'wall' ? wall : cpu).floor;
    const m = median(v);
    const spread = v.length > 1 ? ` (${Math.min(...v).toFixed(1)}-${Math.max(...v).toFixed(1)})` : '';
    const ratio =
      form === 'floor'
        ? ''
        : `, ${(m / median(floor)).toFixed(2)} x floor (${(Math.min(...v) / Math.max(...floor)).toFixed(2)}-${(Math.max(...v) / Math.min(...floor)).toFixed(2)})`;
    return `${clock} ${m.toFixed(1)} s${spread}${ratio}`;
  };
  const line = (label: string, form: Form, what: string): void => {
    if (wall[form].length === 0) return;
    console.log(`${label.padEnd(11)} ${figure(form, 'wall')}; ${figure(form, 'cpu')}   ${what}`);
  };
  console.log(
    `grid        ${grid} (${plan.auditId}), ${plan.runs.length} runs x ${fmt(plan.grid.rows)} rows = ${fmt(rows)} rows`,
  );
  console.log(`plan        ${planSeconds.toFixed(2)} s to validate, expand, draw and place (no rows; first call)`);
  line('plan --out', 'cli', `the command (node start-up + plan + rows + hash + write + manifests + table)`);
  line(
    'writeAudit',
    'writeAudit',
    `${fmt(rows / median(wall.writeAudit))} rows/s (plan + rows + hash + write + manifests)`,
  );
  line(
    'I/O floor',
    'floor',
    `${fmt((plan.runs.length * sampleRows) / median(wall.floor))} rows/s (the same bytes: sha256, write, fsync; 8 runs at once)`,
  );
  line('per-run', 'perRun', 'plan + every run regenerated, stamped per run (the previous writer; first repeat only)');
  if (wall.perRun.length > 0)
    console.log(
      `speed-up    ${(median(wall.perRun) / median(wall.writeAudit)).toFixed(2)} x wall (per-run / writeAudit)`,
    );
  console.log(`peak RSS    ${peak.toFixed(0)} MiB (writeAudit)`);
  console.log(`repeats     ${repeats}, medians (min-max); CPU = user + system seconds (plan --out: the child's)`);
} finally {
  if (values.out === undefined) rmSync(out, { recursive: true, force: true });
}
