import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { execa } from 'execa';
import type { TokenCount, TokenRow } from '../manifest/index.js';
import { TRAINER_DIR } from '../paths.js';
import { trainerPython } from './python.js';

/**
 * The trainer's own count of rows in tokens (`python -m canary_trainer.check_rows`): its chat
 * rendering and the model's tokenizer, no weights loaded, offline (only a cached tokenizer). What
 * the plan-time length check (`src/manifest/length-check.ts`) asks of a Hugging Face model.
 */
export async function countRowTokens(model: unknown, rows: TokenRow[], maxLength: number, hubCache: string): Promise<TokenCount> {
  const dir = await mkdtemp(join(tmpdir(), 'canary-row-lengths-'));
  try {
    await writeFile(join(dir, 'model.json'), JSON.stringify(model));
    await writeFile(join(dir, 'rows.jsonl'), rows.map((r) => JSON.stringify(r)).join('\n'));
    const inherited = process.env.PYTHONPATH;
    const result = await execa(trainerPython(), ['-m', 'canary_trainer.check_rows', '--model', join(dir, 'model.json'), '--rows', join(dir, 'rows.jsonl'), '--max-length', String(maxLength)], {
      env: { PYTHONPATH: inherited ? `${TRAINER_DIR}${delimiter}${inherited}` : TRAINER_DIR, HF_HUB_OFFLINE: '1', TRANSFORMERS_OFFLINE: '1', HF_HUB_CACHE: hubCache },
      reject: false,
      timeout: 300_000,
    });
    if (result.exitCode !== 0) return { skipped: `the token count failed (exit ${String(result.exitCode)}): ${String(result.stderr).split('\n').filter(Boolean).at(-1) ?? ''}` };
    return JSON.parse(String(result.stdout).trim().split('\n').at(-1) ?? '{}') as TokenCount;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
