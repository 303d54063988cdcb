import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { commandHelp, parseCommandArgs } from '../../src/cli/command.js';
import { command, resolveAuditDir } from '../../src/cli/report.js';
import { UserInputError } from '../../src/errors.js';
import { buildFixtureAudit, type FixtureAudit } from '../fixtures/audit-builder.js';
import { expectOutput } from '../helpers/output-schema.js';

let root: string;
let audit: FixtureAudit;

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'ca-cli-'));
  audit = await buildFixtureAudit(join(root, 'artifacts'), {
    name: 'cli',
    runs: [
      {
        cell: { dose: 2, seed: 0 },
        canaries: [{ id: 'f000', code: '0101', dose: 2 }],
        heldOut: [{ id: 'h000', code: '2020' }],
      },
      {
        cell: { dose: 4, seed: 0 },
        canaries: [{ id: 'f000', code: '0101', dose: 4 }],
        heldOut: [{ id: 'h000', code: '2020' }],
        status: 'failed',
      },
    ],
    outcome: (c) => ({ rank: c.canary.inserted ? 2 : 5000 }),
  });
});

afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

async function run(argv: string[]): Promise<{ code: number; out: string }> {
  const chunks: string[] = [];
  const spy = vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
    chunks.push(String(chunk));
    return true;
  });
  try {
    const code = await command.run(parseCommandArgs(command, argv));
    return { code, out: chunks.join('') };
  } finally {
    spy.mockRestore();
  }
}

describe('canary-audit report', () => {
  it('finds an audit by id under --artifacts and writes the asked formats to --out', async () => {
    const out = join(root, 'out');
    const { code, out: stdout } = await run([
      audit.auditId,
      '--artifacts',
      join(root, 'artifacts'),
      '--format',
      'MD,json',
      '--out',
      out,
      '--resamples',
      '50',
      '--json',
    ]);
    expect(code).toBe(0);
    const printed = expectOutput<{
      files: string[];
      counts: { finished: number; failed: number };
      warnings: { kind: string }[];
    }>('report-output', stdout);
    expect(printed.files.sort()).toEqual([join(out, 'report.md'), join(out, 'summary.json')]);
    expect(printed.counts).toMatchObject({ finished: 1, failed: 1 });
    expect(printed.warnings.map((w) => w.kind)).toContain('failed_runs');
    expect(existsSync(join(out, 'report.csv'))).toBe(false);
  });

  it('takes an audit folder path and defaults to <audit>/report with every format', async () => {
    const { code, out } = await run([audit.auditDir, '--resamples', '50']);
    expect(code).toBe(0);
    expect(out).toContain(`wrote ${join(audit.auditDir, 'report', 'report.html')}`);
    expect(out).toMatch(/1\/2 runs finished, 1 failed, 0 missing/);
    expect(existsSync(join(audit.auditDir, 'report', 'report.csv'))).toBe(true);
  });

  it('accepts the path of audit.json itself', async () => {
    expect(await resolveAuditDir(join(audit.auditDir, 'audit.json'), '/nowhere')).toBe(audit.auditDir);
  });

  it('rejects unknown audits and formats with one clear line', async () => {
    await expect(run(['audit-000000000000', '--artifacts', join(root, 'artifacts')])).rejects.toThrow(
      /no audit "audit-000000000000".*--artifacts DIR/,
    );
    await expect(run([audit.auditDir, '--format', 'md,pdf'])).rejects.toThrow(UserInputError);
    await expect(run([audit.auditDir, '--format', 'md,pdf'])).rejects.toThrow(
      /unknown report format "pdf"; use a comma-separated list of md, csv, json, html/,
    );
    await expect(run([audit.auditDir, '--resamples', '0'])).rejects.toThrow(/--resamples must be an integer >= 1/);
    await expect(run([audit.auditDir, '--threshold-strategy', 'holm'])).rejects.toThrow(
      /--threshold-strategy must be one of bonferroni, split, multisplit, got "holm"/,
    );
  });

  it('documents its options and defaults in --help', () => {
    const help = commandHelp(command);
    // The usage line is generated from the option table: every option the parser takes is in it.
    expect(help).toMatch(
      /^Usage: canary-audit report AUDIT \[--format LIST\] \[--out DIR\] \[--artifacts DIR\] \[--seed N\] \[--resamples N\]\s+\[--margin BITS\]\s+\[--threshold-strategy NAME\]\s+\[--extrapolate\]\s+\[--json\] \[--help\]\n/,
    );
    expect(help).toMatch(
      /--threshold-strategy NAME\s+How the Clopper–Pearson, binomial one-run and f-DP one-run ε bounds pick their threshold: bonferroni/,
    );
    expect(help).toMatch(/--extrapolate\s+Extrapolated exposure for probes of a sampled candidate space/);
    expect(help).toMatch(
      /--margin BITS\s+Equivalence margin of the verdicts, bits \(> 0\)\. Default: the grid's analysis\.margin_bits, else 1\./,
    );
    expect(help).toMatch(/--out DIR\s+Output folder\. Default: <audit folder>\/report\./);
    expect(help).toMatch(/--resamples N\s+Bootstrap resamples per interval\. Default 2000\./);
  });
});
