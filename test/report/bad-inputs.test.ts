import { execFileSync } from 'node:child_process';
import { mkdtemp, readFile, rm, symlink, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { UserInputError } from '../../src/errors.js';
import { computeReport } from '../../src/report/index.js';
import { buildFixtureAudit, type FixtureAudit, type FixtureRun } from '../fixtures/audit-builder.js';

let root: string;

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'ca-bad-'));
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

const canaries = [{ id: 'f000', code: '4821', dose: 4 }];
const heldOut = [{ id: 'h000', code: '1234' }];

function build(runs: FixtureRun[]): Promise<FixtureAudit> {
  return buildFixtureAudit(root, { name: 'bad-inputs', runs, outcome: (c) => ({ rank: c.canary.inserted ? 3 : 90 }) });
}

async function failure(auditDir: string): Promise<UserInputError> {
  try {
    await computeReport({ auditDir, resamples: 10 });
  } catch (error) {
    expect(error).toBeInstanceOf(UserInputError);
    return error as UserInputError;
  }
  throw new Error('expected the report to fail');
}

const scorePath = (a: FixtureAudit, probe = 'f000.hidden', phase = 'final'): string =>
  join(a.runs[0]!.dir, 'output', 'scores', phase, `${probe}.f32`);
const resultPath = (a: FixtureAudit): string => join(a.runs[0]!.dir, 'output', 'result.json');

/** The error a report ends with (a ReadBoundaryError is a CanaryAuditError, exit 2, not a UserInputError). */
async function refusal(auditDir: string): Promise<Error> {
  return computeReport({ auditDir, resamples: 10 }).then(
    () => {
      throw new Error('expected the report to refuse');
    },
    (error: unknown) => error as Error,
  );
}

describe('files the report reads go through the read boundary', () => {
  it('a result.json that is a symlink to /etc/passwd is refused, not parsed', async () => {
    const a = await build([{ cell: { seed: 0 }, canaries, heldOut }]);
    await rm(resultPath(a));
    await symlink('/etc/passwd', resultPath(a));
    const e = await refusal(a.auditDir);
    expect(e.message).toMatch(
      /result\.json: JSON artifact resolves \(through a symlink\) to \/etc\/passwd, outside .*; not read/,
    );
    expect(e.message).not.toContain('root:');
  });

  it('a manifest.json that is a FIFO is refused without waiting for a writer', async () => {
    const a = await build([{ cell: { seed: 0 }, canaries, heldOut }]);
    const manifest = join(a.runs[0]!.dir, 'manifest.json');
    await rm(manifest);
    execFileSync('mkfifo', [manifest]);
    const e = await refusal(a.auditDir);
    expect(e.message).toMatch(/manifest\.json: JSON artifact is a FIFO \(named pipe\), not a regular file; not read/);
  }, 10_000);

  it('a score file that is a FIFO or a symlink (to /dev/zero) is refused, not read', async () => {
    const a = await build([{ cell: { seed: 0 }, canaries, heldOut }]);
    await rm(scorePath(a));
    execFileSync('mkfifo', [scorePath(a)]);
    expect((await failure(a.auditDir)).message).toMatch(
      /\.f32: score file is not a regular file \(a FIFO, a device or a folder\); not read/,
    );
    await rm(scorePath(a));
    await symlink('/dev/zero', scorePath(a));
    expect((await failure(a.auditDir)).message).toMatch(
      /\.f32: score file is a symlink; the trainer writes regular files/,
    );
  }, 10_000);
});

describe('damaged artifacts are errors that name the file', () => {
  it('a truncated score file', async () => {
    const a = await build([{ cell: { seed: 0 }, canaries, heldOut }]);
    await truncate(scorePath(a), 40000 - 4);
    const e = await failure(a.auditDir);
    expect(e.message).toContain(scorePath(a));
    expect(e.message).toMatch(/39996 bytes but result\.json promises 10000 float32 scores .*truncated/);
    expect(e.exitCode).toBe(2);
  });

  it('a score file longer than result.json promises', async () => {
    const a = await build([{ cell: { seed: 0 }, canaries, heldOut }]);
    await writeFile(scorePath(a), Buffer.concat([await readFile(scorePath(a)), Buffer.alloc(4)]));
    const e = await failure(a.auditDir);
    expect(e.message).toContain(scorePath(a));
    expect(e.message).toMatch(/holds more than 40000 bytes but result\.json promises 10000 float32 scores/);
    expect(e.exitCode).toBe(2);
  });

  it('a score file rewritten after the fact (sha256 mismatch)', async () => {
    const a = await build([{ cell: { seed: 0 }, canaries, heldOut }]);
    const bytes = await readFile(scorePath(a));
    bytes.writeFloatLE(-0.5, 4 * 17);
    await writeFile(scorePath(a), bytes);
    const e = await failure(a.auditDir);
    expect(e.message).toContain(scorePath(a));
    expect(e.message).toMatch(/sha256 .* differs from scores_sha256/);
  });

  it('a missing score file', async () => {
    const a = await build([{ cell: { seed: 0 }, canaries, heldOut }]);
    await rm(scorePath(a));
    const e = await failure(a.auditDir);
    expect(e.message).toContain(scorePath(a));
    expect(e.message).toMatch(/ENOENT/);
  });

  it('a result whose candidate space disagrees with its manifest', async () => {
    const a = await build([{ cell: { seed: 0 }, canaries, heldOut }]);
    const result = JSON.parse(await readFile(resultPath(a), 'utf8')) as {
      candidate_space: { kind: string; size: number };
    };
    result.candidate_space = { kind: 'sampled', size: 20000 };
    await writeFile(resultPath(a), JSON.stringify(result));
    const e = await failure(a.auditDir);
    expect(e.message).toMatch(
      new RegExp(
        `^${resultPath(a).replaceAll('.', '\\.')}: candidate_space: is sampled \\|C\\|=20000 but manifest\\.json asks for exhaustive \\|C\\|=10000`,
      ),
    );
  });

  it('runs with different candidate spaces pooled into one comparison', async () => {
    const a = await build([
      { cell: { seed: 0 }, canaries, heldOut },
      { cell: { seed: 1 }, canaries, heldOut, space: { kind: 'sampled', decoys: 99 } },
    ]);
    const e = await failure(a.auditDir);
    expect(e.code).toBe('E_SPACE_MISMATCH');
    expect(e.message).toContain(join(a.runs[1]!.dir, 'output', 'result.json'));
    expect(e.message).toMatch(/exhaustive \|C\|=10000 .* but sampled \|C\|=100/);
  });

  it('a result.json that is not valid JSON, with line and column', async () => {
    const a = await build([{ cell: { seed: 0 }, canaries, heldOut }]);
    await writeFile(resultPath(a), '{\n  "schema_version": "canary-audit.result/1",\n  "run_id": oops\n}\n');
    const e = await failure(a.auditDir);
    // Line 3, column 13: the `o` of `oops`.
    expect(e.message.startsWith(`${resultPath(a)}:3:13: not valid JSON`)).toBe(true);
  });

  it('a result probe the manifest does not know', async () => {
    const a = await build([{ cell: { seed: 0 }, canaries, heldOut }]);
    const result = JSON.parse(await readFile(resultPath(a), 'utf8')) as {
      evaluations: { probes: { probe_id: string }[] }[];
    };
    result.evaluations[0]!.probes[0]!.probe_id = 'f999.hidden';
    await writeFile(resultPath(a), JSON.stringify(result));
    const e = await failure(a.auditDir);
    expect(e.message).toContain(
      `${resultPath(a)}: evaluations[0].probes[0].probe_id: "f999.hidden" is not a probe of manifest.json`,
    );
  });

  it('a result that breaks its schema', async () => {
    const a = await build([{ cell: { seed: 0 }, canaries, heldOut }]);
    const result = JSON.parse(await readFile(resultPath(a), 'utf8')) as Record<string, unknown>;
    delete result.evaluations;
    await writeFile(resultPath(a), JSON.stringify(result));
    const e = await failure(a.auditDir);
    expect(e.message).toContain(
      `${resultPath(a)}: result: does not match schemas/result.schema.json: (root): must have required property 'evaluations'`,
    );
  });

  it('a folder without audit.json', async () => {
    const e = await failure(root);
    expect(e.code).toBe('E_NO_AUDIT');
    expect(e.message).toContain(join(root, 'audit.json'));
  });
});

describe('runs that did not finish are listed, not fatal', () => {
  it('reports an audit whose only runs failed or are missing', async () => {
    const a = await build([
      { cell: { seed: 0 }, canaries, heldOut, status: 'failed' },
      { cell: { seed: 1 }, canaries, heldOut, status: 'missing' },
    ]);
    const { summary } = await computeReport({ auditDir: a.auditDir, resamples: 10 });
    expect(summary.counts).toMatchObject({ runs: 2, finished: 0, failed: 1, missing: 1, observations: 0 });
    expect(summary.groups).toEqual([]);
  });

  it('lists a run whose folder was never written', async () => {
    const a = await build([{ cell: { seed: 0 }, canaries, heldOut }]);
    const index = JSON.parse(await readFile(join(a.auditDir, 'audit.json'), 'utf8')) as {
      runs: Record<string, unknown>[];
    };
    const cell = { ...(index.runs[0]!.cell as object), seed: 1 };
    index.runs.push({ run_id: 'run-00000000000000aa', cell_id: 'seed=1', cell, dir: 'runs/run-00000000000000aa' });
    await writeFile(join(a.auditDir, 'audit.json'), JSON.stringify(index));
    const { summary } = await computeReport({ auditDir: a.auditDir, resamples: 10 });
    expect(summary.runs.find((r) => r.run_id === 'run-00000000000000aa')).toMatchObject({
      status: 'missing',
      reason: 'manifest.json not found',
    });
    expect(summary.counts.finished).toBe(1);
  });
});

describe('jsonErrorOffset', () => {
  it('finds where JSON stops being valid', async () => {
    const { jsonErrorOffset } = await import('../../src/fs/json-file.js');
    expect(jsonErrorOffset('{"a": [1, 2,]}')).toBe(12);
    expect(jsonErrorOffset('{"a": 1')).toBe(7);
    expect(jsonErrorOffset('{"a": tru}')).toBe(9);
    expect(jsonErrorOffset('[1] x')).toBe(4);
    expect(jsonErrorOffset('{"a": "\\q"}')).toBe(8);
  });
});
