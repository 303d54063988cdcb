// tier: slow (redis-server, Python or Chromium)
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { execa } from 'execa';
import { afterAll, describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { loadAudit } from '../../src/report/index.js';
import { buildStudyAudit } from '../fixtures/study-audit.js';
import { CLI, FAST_ENV, runCli } from '../queue/helpers/cli.js';
import { removeDir, standInEnv, tempDir, writeFixtureAudit } from '../queue/helpers/fixtures.js';

/**
 * `canary-audit run` on a terminal, as a user sees it: a pseudo-terminal from util-linux `script`
 * (stdout and stderr both a TTY). The audit is the study fixture, whose runs already hold their
 * results (the run queues them and reuses each result.json), so the report has a finding to print.
 */
const root = tempDir('run-tty');
afterAll(() => removeDir(root));

const hasScript = (() => {
  try {
    execFileSync('script', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

/** Terminal output without colour and cursor codes, lines as printed. */
const plain = (text: string): string => text.replace(/\x1b\[[0-9;?]*[A-Za-z]/g, '').replace(/\r\n?/g, '\n');

const shellQuote = (s: string): string => `'${s.replaceAll("'", "'\\''")}'`;

describe.skipIf(!hasScript)('canary-audit run on a terminal', () => {
  it('prints the dashboard and status commands at the start, one line per run, then the headline finding and the report path', async () => {
    const artifacts = join(root, 'artifacts');
    const study = await buildStudyAudit(artifacts);
    // Only the runs with a result (the run reuses each result.json); the stand-in must not train others.
    const indexPath = join(study.auditDir, 'audit.json');
    const index = JSON.parse(readFileSync(indexPath, 'utf8')) as { runs: { dir: string }[] };
    index.runs = index.runs.filter((r) => existsSync(join(study.auditDir, r.dir, 'output', 'result.json')));
    writeFileSync(indexPath, `${JSON.stringify(index, null, 2)}\n`);
    const command = [process.execPath, ...CLI, 'run', study.auditDir, '--cpu', '1', '--artifacts', artifacts]
      .map(shellQuote)
      .join(' ');
    const env = {
      ...FAST_ENV,
      ...standInEnv(),
      CANARY_AUDIT_LOG_FORMAT: '',
      REDIS_URL: '',
      CANARY_AUDIT_QUEUE_PREFIX: '',
      COLUMNS: '120',
      TERM: 'xterm',
    };
    const result = await execa('script', ['-qefc', command, '/dev/null'], {
      cwd: PACKAGE_ROOT,
      env,
      extendEnv: true,
      reject: false,
      timeout: 240_000,
      stdin: 'ignore',
    });
    const out = plain(result.stdout);
    expect(result.exitCode, out).toBe(0);
    const lines = out.split('\n');

    // At the start: the audit, one line per run, and the exact commands that show it.
    const runIds = (await loadAudit(study.auditDir)).runs.map((r) => r.run_id);
    expect(out).toContain(`${study.auditId} study-fixture: ${runIds.length} run(s) in ${study.auditDir}`);
    for (const id of runIds)
      expect(
        lines.filter((l) => l.startsWith(`  ${id}  `)),
        id,
      ).toHaveLength(1);
    const dashboard = lines.find((l) => l.startsWith('watch in the dashboard: '));
    // From the package root, `npx canary-audit` runs this CLI (cli/invocation: no bin on PATH here).
    expect(dashboard).toBe(`watch in the dashboard: npx canary-audit dashboard --audit ${study.auditDir}`);
    expect(lines).toContain(`watch in the terminal: npx canary-audit status --audit ${study.auditDir} --watch`);
    // No log records on a terminal: neither pino's blocks nor NDJSON.
    expect(out).not.toMatch(/INFO|"level":|run manifest/);

    // At the end: the headline finding in one sentence, with its figure, interval, control and n, and the report.
    const finding = lines.find((l) => l.startsWith('finding: '));
    expect(finding, out).toMatch(
      /^finding: .+: median exposure \d+\.\d\d \[\d+\.\d\d, \d+\.\d\d\]( \(⚠ [^)]+\))? bits \(ceiling \d+\.\d\d\) against -?\d+\.\d\d \[.+\]( \(⚠ [^)]+\))? for held-out canaries of the same runs, Δ [+-]?\d+\.\d\d \[.+\]( \(⚠ [^)]+\))?; n = \d+ canar(y|ies) · \d+ runs?/,
    );
    expect(lines).toContain(`report: ${join(study.auditDir, 'report', 'report.html')}`);
    // Last: one verdict line per declared comparison.
    const tail = lines.filter((l) => l.trim() !== '');
    expect(tail[tail.length - 1], out).toMatch(/^verdict: .+ bits, (decided|undecided)/);
    expect(out).not.toMatch(/^wrote /m);
    // A control that failed comes with the finding: the study's bases copy no shown code.
    const control = lines.findIndex((l) =>
      l.startsWith(
        'control failed (base_cannot_copy): visible-arm comparisons rest on a base that does not copy shown codes',
      ),
    );
    expect(control, out).toBeGreaterThan(-1);
    expect(control).toBeLessThan(lines.indexOf(finding as string));
  }, 300_000);
});

describe('canary-audit run with stderr not a terminal', () => {
  it('writes NDJSON log records only, the watch commands among them; --log-format human gives text only', async () => {
    const audit = writeFixtureAudit(join(root, 'piped'), 'piped', [
      { updates: 3, cell: 'a' },
      { updates: 2, cell: 'b' },
    ]);
    const env = { ...standInEnv(), CANARY_AUDIT_LOG_FORMAT: '', REDIS_URL: '', CANARY_AUDIT_QUEUE_PREFIX: '' };
    const piped = await runCli(['run', audit.auditDir, '--cpu', '1', '--no-report'], env);
    expect(piped.exitCode, piped.all).toBe(0);
    const records = piped.stderr
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => JSON.parse(l) as { msg: string; dashboard?: string; state?: string });
    expect(records.find((r) => r.dashboard !== undefined)?.dashboard, piped.stderr.slice(0, 3000)).toBe(
      `npx canary-audit dashboard --audit ${audit.auditDir}`,
    );
    expect(records.filter((r) => r.msg === 'run state' && r.state === 'completed')).toHaveLength(2);
    expect(piped.stdout).toMatch(new RegExp(`^${audit.auditId}: 2/2 runs completed$`));

    const human = await runCli(['run', audit.auditDir, '--cpu', '1', '--no-report', '--log-format', 'human'], env);
    expect(human.exitCode, human.all).toBe(0);
    expect(human.stderr).not.toMatch(/^\{/m);
    expect(human.stderr).toContain(`watch in the dashboard: npx canary-audit dashboard --audit ${audit.auditDir}`);
  }, 120_000);
});
