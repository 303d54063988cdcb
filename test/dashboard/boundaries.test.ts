import { mkdirSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { join, relative } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { exposureWarning } from '../../src/cli/dashboard.js';
import { allowedHostNames, createDashboardApp, type DashboardOptions } from '../../src/dashboard/server.js';
import { diskAuditView, type StatusSource } from '../../src/dashboard/source.js';
import type { QueueConnection } from '../../src/queue/index.js';
import { buildStudyAudit } from '../fixtures/study-audit.js';
import { runMain } from '../queue/helpers/main.js';
import { removeDir, tempDir } from '../queue/helpers/fixtures.js';

/**
 * The dashboard's file and host boundaries, on its request handler (no browser, no Redis): it reads
 * no file outside the artifact root, and refuses DNS-rebound Host names on every bind address.
 */
const root = tempDir('dashboard-boundaries');
afterAll(() => removeDir(root));

const MANIFEST = 'audits/audit-000000000001/runs/run-00000000000000aa/manifest.json';

/** A source whose queue holds one run job, for the routes that read a job. */
function stubSource(auditDir = 'audits/audit-000000000001'): StatusSource {
  const job = { id: 'run-00000000000000aa', data: { manifest: MANIFEST }, failedReason: 'trainer exit 1' };
  const parent = { id: 'audit-000000000001', data: { audit_dir: auditDir } };
  return {
    handles: {
      runs: {
        getJob: async (id: string) => (id === job.id ? job : undefined),
        getJobLogs: async () => ({ logs: ['attempt 1/3'], count: 1 }),
      },
      audits: { getJob: async (id: string) => (id === parent.id ? parent : undefined) },
    },
    current: async () => ({ audits: [{ audit_id: parent.id, completed: 1 }] }),
    diskAuditDir: () => null,
  } as unknown as StatusSource;
}

function app(options: Partial<DashboardOptions>) {
  return createDashboardApp(stubSource(), {
    conn: {} as QueueConnection,
    artifactsDir: null,
    actionToken: null,
    ...options,
  });
}

function runOutput(artifacts: string): string {
  const out = join(artifacts, 'audits', 'audit-000000000001', 'runs', 'run-00000000000000aa', 'output');
  mkdirSync(out, { recursive: true });
  return out;
}

describe('dashboard files', () => {
  it("serves a run's trainer log from inside the artifact root", async () => {
    const artifacts = join(root, 'inside');
    writeFileSync(join(runOutput(artifacts), 'trainer.stderr.log'), 'line 1\nline 2\n');
    const res = await app({ artifactsDir: artifacts }).request('/api/runs/run-00000000000000aa', {
      headers: { host: 'localhost:8790' },
    });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { trainer_log: string[] }).trainer_log).toEqual(['line 1', 'line 2']);
  });

  it('does not follow a trainer.stderr.log symlink out of the root (/etc/passwd)', async () => {
    const artifacts = join(root, 'symlink');
    symlinkSync('/etc/passwd', join(runOutput(artifacts), 'trainer.stderr.log'));
    const res = await app({ artifactsDir: artifacts }).request('/api/runs/run-00000000000000aa', {
      headers: { host: '127.0.0.1' },
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { trainer_log: string[] | null; failure: string };
    expect(body.trainer_log).toBeNull();
    expect(JSON.stringify(body)).not.toContain('root:');
    expect(body.failure).toBe('trainer exit 1');
  });

  it('does not wait on a trainer.stderr.log that is a FIFO', async () => {
    const artifacts = join(root, 'fifo-log');
    execFileSync('mkfifo', [join(runOutput(artifacts), 'trainer.stderr.log')]);
    const res = await app({ artifactsDir: artifacts }).request('/api/runs/run-00000000000000aa', {
      headers: { host: 'localhost' },
    });
    expect(((await res.json()) as { trainer_log: unknown }).trainer_log).toBeNull();
  }, 10_000);

  it('does not follow an output folder that is a symlink out of the root', async () => {
    const artifacts = join(root, 'outdir');
    const outside = join(root, 'elsewhere');
    mkdirSync(outside, { recursive: true });
    writeFileSync(join(outside, 'trainer.stderr.log'), 'secret outside the root\n');
    const runDir = join(artifacts, 'audits', 'audit-000000000001', 'runs', 'run-00000000000000aa');
    mkdirSync(runDir, { recursive: true });
    symlinkSync(outside, join(runDir, 'output'));
    const res = await app({ artifactsDir: artifacts }).request('/api/runs/run-00000000000000aa', {
      headers: { host: 'localhost' },
    });
    expect(((await res.json()) as { trainer_log: unknown }).trainer_log).toBeNull();
  });
});

describe('dashboard plot files', () => {
  it('computes no plot from an audit holding a symlink out of the root (a result.json -> /etc/passwd)', async () => {
    const artifacts = join(root, 'plot');
    const audit = await buildStudyAudit(join(artifacts, 'audits'));
    const result = (readdirSync(join(audit.auditDir, 'runs'), { recursive: true }) as string[]).find((p) =>
      p.endsWith('result.json'),
    ) as string;
    rmSync(join(audit.auditDir, 'runs', result));
    symlinkSync('/etc/passwd', join(audit.auditDir, 'runs', result));
    const relDir = relative(artifacts, audit.auditDir);
    const res = await createDashboardApp(stubSource(relDir), {
      conn: {} as QueueConnection,
      artifactsDir: artifacts,
      actionToken: null,
    }).request('/api/audits/audit-000000000001/plot', { headers: { host: 'localhost' } });
    const body = (await res.json()) as { spec: unknown; reason: string };
    expect(body.spec).toBeNull();
    expect(body.reason).toMatch(/result\.json is a symlink that leads outside the artifact root/);
    expect(body.reason).not.toContain('root:');
  });
});

describe('dashboard report of an audit shown from disk (dashboard --audit DIR)', () => {
  /** The app over one audit folder, as `dashboard --audit DIR` shows it (no artifact root). */
  async function fromDisk(auditDir: string) {
    const view = await diskAuditView(auditDir);
    const source = {
      current: async () => ({ audits: [view] }),
      diskAuditDir: () => auditDir,
    } as unknown as StatusSource;
    return createDashboardApp(source, {
      conn: {} as QueueConnection,
      artifactsDir: null,
      actionToken: null,
      auditDirs: [auditDir],
    });
  }
  const report = async (name: string, place: (file: string) => void) => {
    const audit = await buildStudyAudit(join(root, name));
    mkdirSync(join(audit.auditDir, 'report'), { recursive: true });
    place(join(audit.auditDir, 'report', 'report.html'));
    const res = await (await fromDisk(audit.auditDir)).request(`/api/audits/${audit.auditId}/report`, {
      headers: { host: 'localhost' },
    });
    return { status: res.status, body: await res.text() };
  };

  it("serves the audit's own report.html", async () => {
    const got = await report('report-ok', (file) => writeFileSync(file, '<html><p>the report</p></html>'));
    expect(got).toEqual({ status: 200, body: '<html><p>the report</p></html>' });
  });

  it('refuses a report.html that is a symlink to /etc/passwd', async () => {
    const got = await report('report-passwd', (file) => symlinkSync('/etc/passwd', file));
    expect(got.status).toBe(403);
    expect(got.body).not.toContain('root:');
    expect(JSON.parse(got.body).error).toMatch(
      /^report refused: .*report\.html: report resolves \(through a symlink\) to \/etc\/passwd, outside .*report-passwd.*; not read/,
    );
  });

  it('refuses a report.html that is a FIFO, without waiting for a writer', async () => {
    const got = await report('report-fifo', (file) => execFileSync('mkfifo', [file]));
    expect(got.status).toBe(403);
    expect(JSON.parse(got.body).error).toMatch(/report\.html: report is a FIFO \(named pipe\), not a regular file/);
  }, 10_000);
});

describe('dashboard Host check', () => {
  const status = async (host: string, bind: string, allowHosts?: string[]) =>
    (await app({ host: bind, ...(allowHosts ? { allowHosts } : {}) }).request('/favicon.ico', { headers: { host } }))
      .status;

  it.each(['127.0.0.1', '0.0.0.0', '::', '10.1.2.3'])(
    'bound to %s: a rebound name is refused, loopback names pass',
    async (bind) => {
      expect(await status('evil.example', bind)).toBe(403);
      expect(await status('evil.example:8790', bind)).toBe(403);
      expect(await status('', bind)).toBe(403);
      for (const name of ['localhost:8790', '127.0.0.1:8790', '[::1]:8790', 'LOCALHOST'])
        expect(await status(name, bind)).toBe(204);
    },
  );

  it('names given with --allow-host pass, and a specific bind address is its own name', async () => {
    expect(await status('dash.internal:8790', '0.0.0.0', ['dash.internal'])).toBe(204);
    expect(await status('other.internal:8790', '0.0.0.0', ['dash.internal'])).toBe(403);
    expect(await status('10.1.2.3:8790', '10.1.2.3')).toBe(204);
    expect(await status('0.0.0.0:8790', '0.0.0.0')).toBe(403);
    expect([...allowedHostNames('0.0.0.0', ['Dash.Internal', 'fd00::1'])]).toEqual([
      '127.0.0.1',
      'localhost',
      '::1',
      '[::1]',
      'dash.internal',
      'fd00::1',
      '[fd00::1]',
    ]);
  });

  it('the warning says what a non-loopback bind exposes and which names pass', () => {
    const w = exposureWarning('0.0.0.0', ['dash.internal'], true);
    expect(w).toMatch(
      /^listening on 0\.0\.0\.0 \(every interface\): anyone who reaches it sees every audit and run, their failures and trainer logs/,
    );
    expect(w).toContain('cancel audits and retry runs');
    expect(w).toContain('requests must name localhost, dash.internal');
    expect(exposureWarning('10.1.2.3', [], false)).not.toContain('cancel');
  });

  it('`dashboard --allow-host` takes names and refuses junk in one line (exit 2)', async () => {
    const help = (await runMain(['dashboard', '--help'])).stdout;
    expect(help).toContain('--allow-host NAME');
    const bad = await runMain(['dashboard', '--redis', 'redis://127.0.0.1:1', '--allow-host', 'evil.example/x']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--allow-host "evil\.example\/x" is not a host name/);
  });
});
