import { readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { FleetHeartbeat, openRedis, type EmbeddedRedis } from '../../src/queue/index.js';
import { runCli } from '../queue/helpers/cli.js';
import { removeDir, tempDir } from '../queue/helpers/fixtures.js';
import { runMain } from '../queue/helpers/main.js';
import { isolatedConnection, startTestRedis } from '../queue/helpers/redis.js';

/** The CLI's help, suggestions and one-line errors, as a new user meets them. */
const root = tempDir('cli-help');
let redis: EmbeddedRedis;
beforeAll(async () => {
  redis = await startTestRedis(root);
});
afterAll(async () => {
  await redis?.stop();
  removeDir(root);
});

const QUICKSTART = readFileSync(join(PACKAGE_ROOT, 'configs', 'quickstart.yaml'), 'utf8');

function grid(name: string, text: string): string {
  const path = join(root, `${name}.yaml`);
  writeFileSync(path, text);
  return path;
}

/** stderr's lines, without the trailing empty one. */
const lines = (text: string): string[] => text.split('\n').filter((l) => l !== '');

describe('help and suggestions', () => {
  it("`help <cmd>` prints the command's own help, the same as `<cmd> --help`", async () => {
    const viaHelp = await runMain(['help', 'plan']);
    const viaFlag = await runMain(['plan', '--help']);
    expect(viaHelp.code).toBe(0);
    expect(viaHelp.stdout).toBe(viaFlag.stdout);
    expect(viaHelp.stdout).toMatch(/^Usage: canary-audit plan GRID \[--json\] \[--out DIR\]/);
    expect(viaHelp.stdout).not.toContain('Commands:');
    const unknown = await runMain(['help', 'plna']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/unknown command "plna" \(did you mean plan\?\)/);
  });

  it("every command's usage line lists every option its parser accepts", async () => {
    for (const name of [
      'plan',
      'run',
      'submit',
      'worker',
      'status',
      'dashboard',
      'cancel',
      'models',
      'datasets',
      'report',
    ]) {
      const { command } = (await import(`../../src/cli/${name}.ts`)) as {
        command: { options: Record<string, unknown> };
      };
      const { stdout } = await runMain(['help', name]);
      const usage = stdout.slice(0, stdout.indexOf('\n\n'));
      for (const option of [...Object.keys(command.options), 'help'])
        expect(usage, `${name} --${option}`).toContain(`[--${option}`);
    }
    const report = await runMain(['report', '--help']);
    expect(report.stdout).toMatch(/\[--seed N\][\s\S]*\[--resamples N\]/);
  });

  it("suggests the nearest command and flag, without parseArgs's own message", async () => {
    const command = await runMain(['plna', 'configs/quickstart.yaml']);
    expect(command.code).toBe(2);
    expect(lines(command.stderr)).toEqual([
      expect.stringMatching(/^canary-audit: unknown command "plna" \(did you mean plan\?\); commands: plan, run/),
    ]);
    const flag = await runMain(['plan', '--jsn', 'configs/quickstart.yaml']);
    expect(flag.code).toBe(2);
    expect(lines(flag.stderr)).toEqual([
      'canary-audit: plan has no option --jsn (did you mean --json?); see `canary-audit help plan`',
    ]);
    expect(flag.stderr).not.toMatch(/Unknown option|To specify a positional/);
    const value = await runMain(['status', '--interval']);
    expect(value.stderr).toBe('canary-audit: --interval needs a value (S); see `canary-audit help status`\n');
  });

  it('names the missing or unknown action instead of counting arguments', async () => {
    const list = await runMain(['models', 'list']);
    expect(list.code).toBe(2);
    expect(list.stderr).toMatch(
      /^canary-audit: models has no action "list"; its one action is fetch \(download models/,
    );
    expect(list.stderr).not.toMatch(/argument\(s\)/);
    const none = await runMain(['datasets']);
    expect(none.stderr).toMatch(/^canary-audit: datasets needs an action: fetch/);
    const missing = await runMain(['plan']);
    expect(missing.stderr).toMatch(/^canary-audit: plan needs GRID; usage: canary-audit plan GRID;/);
  });
});

describe('dashboard ports', () => {
  it('refuses a port out of range in one line, before touching Redis', async () => {
    const result = await runMain(['dashboard', '--port', '99999', '--redis', 'redis://127.0.0.1:1']);
    expect(result.code).toBe(2);
    expect(lines(result.stderr)).toEqual(['canary-audit: --port: must be 0..65535 (0: any free port), got 99999']);
  });

  it('a busy port is one line and exit 1, and the process exits (no Redis poller left open)', async () => {
    const busy: Server = createServer();
    await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve));
    const port = (busy.address() as { port: number }).port;
    try {
      const result = await runCli(['dashboard', '--port', String(port), '--redis', redis.url], {
        CANARY_AUDIT_LOG_FORMAT: 'json',
      });
      expect(result.exitCode, result.all).toBe(1);
      expect(lines(result.stderr)).toEqual([
        `canary-audit: cannot listen on 127.0.0.1:${port}: the port is in use (another dashboard?); pass --port N with a free port, or --port 0 for any free one`,
      ]);
      expect(result.all).not.toMatch(/internal error|"stack"/);
    } finally {
      busy.close();
    }
  }, 60_000);
});

describe('hostile grids: one line each, the most specific', () => {
  const planOne = async (path: string): Promise<string[]> => {
    const result = await runMain(['plan', path]);
    expect(result.code).toBe(2);
    return lines(result.stderr);
  };

  it("a model preset with a bad name: the key's own message, not the pattern nor the axis entry", async () => {
    const text = `${QUICKSTART.replace('model: [tiny]', 'model: ["my model"]')}models:\n  "my model": {backend: tiny}\n`;
    const out = await planOne(grid('bad-model-name', text));
    expect(out).toHaveLength(1);
    expect(out[0]).toMatch(
      /bad-model-name\.yaml:\d+:3: models: key "my model" is not a valid name \(letters, digits, _ \. -\)$/,
    );
  });

  it('a misspelt required key: the unknown key with its suggestion, no "missing required key"', async () => {
    const out = await planOne(grid('trainng', QUICKSTART.replace(/^training:/m, 'trainng:')));
    expect(out).toHaveLength(1);
    expect(out[0]).toMatch(
      /trainng\.yaml:\d+:1: trainng: unknown key "trainng" \(did you mean "training"\? it is required\)/,
    );
  });

  it('rows too long for a tiny model: once for every visibility, and no style compact to a compact grid', async () => {
    const compact = await planOne(
      grid('too-long', QUICKSTART.replace('model: [tiny]', 'model: [{backend: tiny, max_len: 40}]')),
    );
    expect(compact).toHaveLength(1);
    expect(compact[0]).toMatch(
      /with visible and redacted cues renders rows of up to \d+ tokens, but model tiny\(l2,h2,d64,c40\) reads at most 40; use max_len \d+ or more on the model, or a real model$/,
    );
    expect(compact[0]).not.toContain('style compact');
    const full = await planOne(
      grid(
        'too-long-full',
        QUICKSTART.replace('model: [tiny]', 'model: [{backend: tiny, max_len: 40}]').replace(
          'style: compact',
          'style: full',
        ),
      ),
    );
    expect(full).toHaveLength(1);
    expect(full[0]).toContain('use style compact, max_len');
  });
});

describe('status explanations that match the situation', () => {
  it('`status --workers` after a clean stop says the workers stopped cleanly', async () => {
    const conn = isolatedConnection(redis);
    const env = { CANARY_AUDIT_QUEUE_PREFIX: conn.prefix };
    const never = await runMain(['status', '--workers', '--redis', redis.url], env);
    expect(never.stdout).toMatch(/^no workers: none has sent a heartbeat in the last day/);
    const client = openRedis(conn);
    try {
      const beat = new FleetHeartbeat(client, conn, { host: 'box', runner: 'local', slots: () => [] }, 1000);
      await beat.start();
      const running = await runMain(['status', '--workers', '--redis', redis.url], env);
      expect(running.stdout).toMatch(/box\s+\d+\s+idle/);
      await beat.stop();
      const after = await runMain(['status', '--workers', '--redis', redis.url], env);
      expect(after.stdout).toMatch(
        new RegExp(
          `^no workers running: the last one stopped cleanly \\(the latest ${beat.workerId.replace('.', '\\.')}, \\d+s ago\\); start one with`,
        ),
      );
      expect(after.stdout).not.toContain('heartbeat');
    } finally {
      client.disconnect();
    }
  });
});
