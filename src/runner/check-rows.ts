import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { execa } from 'execa';
import type { TokenCount, TokenJob } from '../manifest/index.js';
import { TRAINER_DIR } from '../paths.js';
import { trainerPython } from './python.js';

/**
 * The trainer's own count of rows in tokens (`python -m canary_trainer.check_rows`): its chat
 * rendering and the model's tokenizer, no weights loaded, offline (only a cached tokenizer). What
 * the plan-time length check (`src/manifest/length-check.ts`) asks of Hugging Face models: every
 * model of a plan in one process, so transformers is imported once.
 */
export async function countRowTokens(jobs: TokenJob[], hubCache: string): Promise<TokenCount[]> {
  if (jobs.length === 0) return [];
  const dir = await mkdtemp(join(tmpdir(), 'canary-row-lengths-'));
  try {
    const args = ['-m', 'canary_trainer.check_rows'];
    for (const [k, job] of jobs.entries()) {
      await writeFile(join(dir, `model-${k}.json`), JSON.stringify(job.model));
      await writeFile(join(dir, `rows-${k}.jsonl`), job.rows.map((r) => JSON.stringify(r)).join('\n'));
      args.push(
        '--model',
        join(dir, `model-${k}.json`),
        '--rows',
        join(dir, `rows-${k}.jsonl`),
        '--max-length',
        String(job.maxLength),
      );
    }
    const inherited = process.env.PYTHONPATH;
    const result = await execa(trainerPython(), args, {
      env: {
        PYTHONPATH: inherited ? `${TRAINER_DIR}${delimiter}${inherited}` : TRAINER_DIR,
        HF_HUB_OFFLINE: '1',
        TRANSFORMERS_OFFLINE: '1',
        HF_HUB_CACHE: hubCache,
      },
      reject: false,
      timeout: 300_000,
    });
    const lines = String(result.stdout)
      .trim()
      .split('\n')
      .filter((l) => l.startsWith('{'));
    const failed = `the token count failed (exit ${String(result.exitCode)}): ${String(result.stderr).split('\n').filter(Boolean).at(-1) ?? ''}`;
    // A line per model, in order; a count that died part-way leaves the rest skipped.
    return jobs.map((_, k) =>
      k < lines.length ? (JSON.parse(lines[k] as string) as TokenCount) : { skipped: failed },
    );
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
