import { describe, expect, it } from 'vitest';
import { reportDesign } from '../../src/report/design.js';
import { baseKeyOf } from '../../src/report/manifest-info.js';
import type { LoadedRun } from '../../src/report/load-audit.js';
import type { ManifestInfo } from '../../src/report/manifest-info.js';

/** A run as the report loads it, with only what the design reads: its cell, base and rows. */
function run(cell: Record<string, unknown>, base: string | null, rows: string): LoadedRun {
  const manifest = { base, rows_sha256: rows } as unknown as ManifestInfo;
  return {
    run_id: `run-${JSON.stringify(cell)}`,
    cell_id: JSON.stringify(cell),
    cell,
    dir: '',
    status: 'finished',
    reason: null,
    failure: null,
    manifest,
    resultPath: '',
    outputDir: '',
  };
}

/** Two doses x three seeds of one tiny model; `base(seed)` and `rows(dose, seed)` say what each run starts from and trains on. */
function grid(base: (seed: number) => string | null, rows: (dose: number, seed: number) => string): LoadedRun[] {
  return [1, 4].flatMap((dose) =>
    [0, 1, 2].map((seed) => run({ visibility: 'redacted', dose, seed, model: 'tiny' }, base(seed), rows(dose, seed))),
  );
}

describe('the replication design read from the manifests', () => {
  it('one base, each seed its own rows: fine-tuning seeds of one base', () => {
    const d = reportDesign(
      grid(
        () => 'tiny:abc:init0',
        (dose, seed) => `${dose}/${seed}`,
      ),
      ['seed'],
    );
    expect(d).toMatchObject({
      population: 'fine-tuning seeds of one base',
      seeds: 3,
      bases: [{ model: 'tiny', bases: 1 }],
      seeds_vary: 'data order and placement',
    });
    expect(d?.text).toBe(
      "Design: 3 seeds (tiny: one base); the seeds of a cell differ in their data order and canary placement. Intervals over a cell's runs generalize over fine-tuning seeds of one base, not over other bases: another pretrained base can land outside them.",
    );
  });

  it('a base per seed: bases and seeds; the same rows in every seed: the training seed only', () => {
    const d = reportDesign(
      grid(
        (seed) => `tiny:abc:init${seed}`,
        (dose) => `${dose}`,
      ),
      ['seed'],
    );
    expect(d).toMatchObject({
      population: 'bases and seeds',
      bases: [{ model: 'tiny', bases: 3 }],
      seeds_vary: 'training seed only',
    });
    expect(d?.text).toContain(
      "differ in the training seed only (the same rows) and in the base they fine-tune. Intervals over a cell's runs generalize over bases and seeds.",
    );
  });

  it('from scratch, one run per cell, and no manifest at all', () => {
    expect(
      reportDesign(
        grid(
          () => null,
          (dose, seed) => `${dose}/${seed}`,
        ),
        ['seed'],
      )?.population,
    ).toBe('seeds of from-scratch training');
    const single = reportDesign(
      [1, 4].map((dose) => run({ dose, seed: 0, model: 'tiny' }, 'tiny:abc:init0', `${dose}`)),
      ['seed'],
    );
    expect(single).toMatchObject({ population: 'one run per cell', seeds: 1, seeds_vary: null });
    expect(single?.text).toContain('intervals cover canary sampling only');
    expect(reportDesign([{ ...run({ dose: 1, seed: 0 }, null, ''), manifest: null }], ['seed'])).toBeNull();
  });

  it('keys a base by what fine-tuning starts from: a tiny base by its corpus and init, an hf model by its checkpoint', () => {
    const tiny = {
      backend: 'tiny',
      name: 'tiny',
      revision: null,
      init_seed: 2,
      tiny: { pretrain: { rows: { sha256: 'c0' } } },
    };
    expect(baseKeyOf(tiny)).toBe('tiny:c0:init2');
    expect(baseKeyOf({ ...tiny, tiny: { pretrain: { rows: { sha256: 'c0' }, init_seed: 0 } } })).toBe('tiny:c0:init0');
    expect(baseKeyOf({ ...tiny, tiny: {} })).toBeNull();
    expect(baseKeyOf({ backend: 'hf', name: 'Qwen/Qwen3-0.6B', revision: 'abc', init_seed: 1 })).toBe(
      'hf:Qwen/Qwen3-0.6B@abc',
    );
    expect(
      baseKeyOf({ backend: 'hf', name: 'Qwen/Qwen3-0.6B', revision: 'abc', init_seed: 1, hf: { random_init: true } }),
    ).toBeNull();
  });
});
