import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { checkedGpuSlots } from '../../src/cli/worker-options.js';
import { runMain } from '../queue/helpers/main.js';
import { removeDir, tempDir } from '../queue/helpers/fixtures.js';

/** `--gpus` on a host without a GPU: the local runner refuses; the docker runner warns. */
const root = tempDir('worker-gpus');
afterAll(() => removeDir(root));
afterEach(() => vi.restoreAllMocks());

describe('worker --gpus without a GPU', () => {
  it('`worker --gpus 0` where nvidia-smi lists none: exit 2, one line, before Redis is contacted', async () => {
    // No nvidia-smi on PATH: what a host without the NVIDIA driver looks like.
    const r = await runMain(['worker', '--gpus', '0', '--redis', 'redis://127.0.0.1:1', '--artifacts', root], {
      PATH: '/nonexistent',
    });
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(
      'canary-audit: --gpus: GPU "0" asked for, but nvidia-smi lists no GPU on this host; use --cpu N for CPU workers (each trainer then runs with a fixed thread count, so its scores match other CPU runs)\n',
    );
  });

  it('a Redis password in --redis gets a warning (argv shows in ps) that never prints the password', async () => {
    const r = await runMain([
      'worker',
      '--cpu',
      '1',
      '--redis',
      'redis://:hunter2@127.0.0.1:1',
      '--artifacts',
      `${root}/missing`,
    ]);
    expect(r.code).toBe(2);
    const [warning, error] = r.stderr.split('\n');
    expect(warning).toBe(
      'canary-audit worker: warning: the Redis password is in --redis, so every user of this host can read it with `ps` while the worker runs (and shell history keeps it); leave it out of the URL and give it by --redis-password-file FILE (mode 0600) or $REDIS_PASSWORD',
    );
    expect(error).toMatch(/artifact root .*missing does not exist/);
    expect(r.stderr).not.toContain('hunter2');
    // No password in the flag (from $REDIS_PASSWORD instead): no warning.
    const quiet = await runMain(
      ['worker', '--cpu', '1', '--redis', 'redis://127.0.0.1:1', '--artifacts', `${root}/missing`],
      { REDIS_PASSWORD: 'hunter2' },
    );
    expect(quiet.stderr).not.toContain('warning');
  });

  it('a GPU that nvidia-smi lists is taken; the docker runner only warns (its engine may see GPUs this process cannot)', () => {
    expect(checkedGpuSlots('0,1', 'local', ['0', '1'])).toEqual([
      { gpu: '0', threads: null },
      { gpu: '1', threads: null },
    ]);
    let err = '';
    vi.spyOn(process.stderr, 'write').mockImplementation((chunk) => {
      err += String(chunk);
      return true;
    });
    expect(checkedGpuSlots('0', 'docker', [])).toEqual([{ gpu: '0', threads: null }]);
    expect(err).toMatch(/^canary-audit: warning: --gpus 0: nvidia-smi lists no GPU here/);
  });
});
