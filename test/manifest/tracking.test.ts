import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { command as runCommand } from '../../src/cli/run.js';
import { command as workerCommand } from '../../src/cli/worker.js';
import { parseCommandArgs } from '../../src/cli/command.js';
import { wandbFrom } from '../../src/cli/tracking-option.js';
import { parseGrid } from '../../src/grid/index.js';
import { planAudit, TRACKING_FILE, trackingWith, writeAudit } from '../../src/manifest/index.js';
import { auditWandb } from '../../src/runner/docker-runner.js';
import { BASE, expectOneError, inputErrors } from '../grid/helpers.js';

const root = mkdtempSync(join(tmpdir(), 'canary-tracking-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const F = 'grids/tracking.yaml';
const TINY = `name: tracked
axes:
  visibility: [visible]
  dose: [1]
  model: [tiny-small]
training: {batch_size: 2, updates: 4, lr: 0.001}
canaries: {focal: 1, held_out: 1}
utility: {rows: 2}
`;

describe('grid tracking: where runs send their curves besides TensorBoard', () => {
  it('takes tracking.wandb and keeps the audit id: it changes where curves go, not the runs', () => {
    const plain = parseGrid(F, BASE);
    const tracked = parseGrid(F, `${BASE}tracking:\n  wandb: {project: canaries, entity: lab}\n`);
    expect(tracked.doc.tracking).toEqual({ wandb: { project: 'canaries', entity: 'lab' } });
    expect(tracked.sha256).toBe(plain.sha256);
  });

  it('refuses a W&B block without a project, naming the field', () => {
    expectOneError(
      inputErrors(() => parseGrid(F, `${BASE}tracking:\n  wandb: {entity: lab}\n`)),
      `${F}:10:10: tracking.wandb: missing required key "project"`,
    );
    expectOneError(
      inputErrors(() => parseGrid(F, `${BASE}tracking:\n  tensorboard: false\n`)),
      `${F}:10:3: tracking`,
    );
  });

  it('writes <audit>/tracking.json when the grid asks for W&B, and removes it when it no longer does', async () => {
    const tracked = join(root, 'tracked.yaml');
    writeFileSync(tracked, `${TINY}tracking:\n  wandb: {project: canaries}\n`);
    const written = await writeAudit(await planAudit(tracked), join(root, 'a'));
    const file = join(written.auditDir, TRACKING_FILE);
    expect(JSON.parse(readFileSync(file, 'utf8'))).toEqual({ wandb: { project: 'canaries' } });
    // The run folder is <audit>/runs/<run_id>/: where the trainer (and the docker runner) look.
    expect(auditWandb(join(written.auditDir, 'runs', written.runs[0]!.runId))).toEqual({ project: 'canaries' });
    const plain = join(root, 'plain.yaml');
    writeFileSync(plain, TINY);
    const again = await writeAudit(await planAudit(plain), join(root, 'a'));
    expect(again.auditDir).toBe(written.auditDir); // same runs, same audit
    expect(existsSync(file)).toBe(false);
    expect(auditWandb(join(again.auditDir, 'runs', again.runs[0]!.runId))).toBeNull();
  });

  it('a bad tracking.json fails the docker run with the fix, not silently', () => {
    const run = join(root, 'bad', 'runs', 'run-1');
    mkdirSync(run, { recursive: true });
    mkdirSync(join(root, 'bad', TRACKING_FILE));
    expect(() => auditWandb(run)).toThrow(/cannot read .*tracking\.json.*; fix: /);
  });

  it('--wandb PROJECT overrides the grid project and keeps its entity', () => {
    expect(trackingWith({ wandb: { project: 'grid', entity: 'lab' } }, 'cli')).toEqual({
      wandb: { project: 'cli', entity: 'lab' },
    });
    expect(trackingWith(undefined, 'cli')).toEqual({ wandb: { project: 'cli' } });
    expect(trackingWith({ wandb: { project: 'grid' } }, undefined)).toEqual({ wandb: { project: 'grid' } });
  });

  it('--wandb on run must name a project; on worker an empty one turns W&B off', () => {
    const parse = (argv: string[]) => parseCommandArgs(runCommand, argv);
    expect(wandbFrom(parse(['g.yaml', '--wandb', 'canaries']))).toBe('canaries');
    expect(wandbFrom(parse(['g.yaml']))).toBeUndefined();
    expect(() => wandbFrom(parse(['g.yaml', '--wandb', ' ']))).toThrow(/--wandb " " is empty; give a W&B project name/);
    expect(() => wandbFrom(parse(['g.yaml', '--wandb', 'lab/canaries']))).toThrow(/tracking\.wandb\.entity/);
    expect(wandbFrom(parseCommandArgs(workerCommand, ['--wandb', '']), true)).toBe('');
  });
});
