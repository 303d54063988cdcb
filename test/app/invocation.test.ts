import { chmodSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { execa } from 'execa';
import { afterAll, describe, expect, it } from 'vitest';
import { CLI_SCRIPT, cliCommand, pathArg, shellWord } from '../../src/app/index.js';
import { watchCommands } from '../../src/cli/run.js';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { removeDir, tempDir, writeFixtureAudit } from '../queue/helpers/fixtures.js';
import { runMain } from '../queue/helpers/main.js';

/**
 * The next steps `run` and `status` print name the CLI as it runs from the user's folder: no
 * `canary-audit` is on PATH after `npm run quickstart`, so a bare `canary-audit …` would not run.
 */
const root = tempDir('invocation');
afterAll(() => removeDir(root));
const noBin = { PATH: '/usr/bin:/bin' };

describe('cliCommand', () => {
  it('is `npx canary-audit` from the package root, `node <path>` elsewhere, `canary-audit` when that bin is this CLI', () => {
    expect(cliCommand(noBin, PACKAGE_ROOT)).toBe('npx canary-audit');
    expect(cliCommand(noBin, root)).toBe(`node ${CLI_SCRIPT}`);
    expect(cliCommand(noBin, join(PACKAGE_ROOT, 'dist'))).toBe('node cli/main.js');
    // A bin on PATH (npm link makes this symlink) that is this CLI; another program of that name is not.
    const bin = join(root, 'bin');
    const other = join(root, 'other');
    mkdirSync(bin);
    mkdirSync(other);
    symlinkSync(CLI_SCRIPT, join(bin, 'canary-audit'));
    writeFileSync(join(other, 'canary-audit'), '#!/bin/sh\n');
    chmodSync(join(other, 'canary-audit'), 0o755);
    expect(cliCommand({ PATH: `${bin}:/usr/bin` }, root)).toBe('canary-audit');
    expect(cliCommand({ PATH: `${other}:/usr/bin` }, root)).toBe(`node ${CLI_SCRIPT}`);
    // Under npx the bin is on npm's PATH, not on the user's shell's.
    expect(cliCommand({ PATH: `${bin}:/usr/bin`, npm_command: 'exec' }, PACKAGE_ROOT)).toBe('npx canary-audit');
  });

  it('quotes what the shell would split', () => {
    expect(shellWord("/tmp/a b/it's")).toBe(`'/tmp/a b/it'\\''s'`);
    expect(pathArg(join(PACKAGE_ROOT, 'artifacts', 'audits', 'x'), PACKAGE_ROOT)).toBe('artifacts/audits/x');
  });
});

describe('a printed next step runs as printed', () => {
  // The audit's private Redis is not running (as after `run` ended): status answers with its own
  // message, which names the dashboard command; the shell finds the command in both folders.
  const audit = writeFixtureAudit(join(root, 'artifacts'), 'hint', [{ updates: 2 }]);
  // What `run` leaves of its private Redis once it has stopped it.
  mkdirSync(join(audit.auditDir, 'redis'));
  writeFileSync(join(audit.auditDir, 'redis', 'redis.conf'), 'port 1\n');
  writeFileSync(join(audit.auditDir, 'redis', 'redis.pass'), 'secret\n');
  for (const [where, cwd] of [
    ['the package root', PACKAGE_ROOT],
    ['another folder', root],
  ] as const) {
    it(`from ${where}`, async () => {
      const env = {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        REDIS_URL: '',
        HOME: root,
        npm_config_cache: join(root, 'npm-cache'),
        npm_config_offline: 'true',
      };
      const status = watchCommands(audit.auditId, audit.auditDir, undefined, env, cwd).find((c) => c.key === 'status')
        ?.command as string;
      expect(status).toMatch(
        cwd === PACKAGE_ROOT ? /^npx canary-audit status --audit / : /^node \/\S+\/dist\/cli\/main\.js status --audit /,
      );
      const result = await execa('sh', ['-c', status], {
        cwd,
        env,
        extendEnv: false,
        reject: false,
        all: true,
        timeout: 60_000,
      });
      expect(result.exitCode, result.all).toBe(1);
      expect(result.all).toMatch(/^canary-audit: the private Redis of .+ is not running/m);
      expect(result.all).toContain(`dashboard --audit ${pathArg(audit.auditDir, cwd)}\``);
    }, 60_000);
  }
});

describe('status without a queue', () => {
  it('names `status --audit DIR` with the newest audit on disk, and the dashboard that reads its files', async () => {
    const artifacts = join(root, 'artifacts');
    const audit = writeFixtureAudit(artifacts, 'newest', [{ updates: 1 }]);
    const none = await runMain(['status', '--artifacts', artifacts], { REDIS_URL: undefined, npm_command: undefined });
    expect(none.code).toBe(2);
    expect(none.stderr).toContain(
      `no Redis given: set REDIS_URL or pass --redis redis://host:6379; for an audit \`canary-audit run\` started, pass its folder: \`npx canary-audit status --audit ${audit.auditDir}\` (the newest under ${artifacts}, newest)`,
    );
    const down = await runMain(['status', '--redis', 'redis://127.0.0.1:1', '--artifacts', artifacts], {
      REDIS_URL: undefined,
    });
    expect(down.code).toBe(1);
    expect(down.stderr).toMatch(
      /^canary-audit: cannot reach Redis at redis:\/\/127\.0\.0\.1:1: .*; check REDIS_URL\/--redis .*; for an audit `canary-audit run` started, pass its folder: `npx canary-audit status --audit /,
    );
    // An audit folder `run` did not start has no private Redis: the queue or its files.
    const submitted = await runMain(['status', '--audit', audit.auditDir], { REDIS_URL: undefined });
    expect(submitted.code).toBe(2);
    expect(submitted.stderr).toContain(
      `has no private Redis (\`canary-audit run\` did not start this audit): pass the queue it was submitted to with --redis URL or REDIS_URL, or read it from its files: \`npx canary-audit dashboard --audit ${audit.auditDir}\``,
    );
  });
});
