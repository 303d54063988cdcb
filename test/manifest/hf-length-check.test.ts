import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import type { ImagePart, Message } from '../../src/contracts/index.js';
import { checkHfLengths, planAudit, type TokenJob, type TokenRow } from '../../src/manifest/index.js';

/**
 * The plan-time row-length check of Hugging Face models asks the trainer's count (here a stand-in
 * that records what it is asked and answers as told) about every kind of row, image rows included:
 * each image part travels with its width and height, from which the trainer adds the image's tokens
 * and says which size the model's image processor would not take.
 */
const GRID = fileURLToPath(new URL('../e2e/hf-vlm-audit.yaml', import.meta.url));

const imageParts = (rows: TokenRow[]): ImagePart[] =>
  rows.flatMap((r) =>
    r.prompt.flatMap((m: Message) =>
      Array.isArray(m.content) ? m.content.filter((p): p is ImagePart => p.type === 'image') : [],
    ),
  );

describe('the hf row-length check on image rows', () => {
  it('sends the image rows with their sizes, and refuses rows the count finds too long at the task line', async () => {
    const plan = await planAudit(GRID);
    const asked: TokenJob[] = [];
    const fits = await checkHfLengths(plan, async (jobs) => {
      asked.push(...jobs);
      return jobs.map((j) => ({ rows: j.rows.length, limit: j.maxLength, longest: 100, over: [], over_count: 0 }));
    });
    expect(fits).toEqual([]);
    expect(asked).toHaveLength(1);
    const parts = imageParts((asked[0] as TokenJob).rows);
    expect(parts.length).toBeGreaterThan(0);
    expect(new Set(parts.map((p) => `${p.width}x${p.height}`))).toEqual(new Set(['196x140']));
    // background, utility, canary and probe rows: every kind carries a screenshot here
    expect((asked[0] as TokenJob).rows.every((r) => imageParts([r]).length === 1)).toBe(true);

    const [error, ...rest] = await checkHfLengths(plan, async (jobs) =>
      jobs.map((j) => ({ rows: j.rows.length, limit: 64, longest: 90, over: [{ i: 0, tokens: 90 }], over_count: 1 })),
    );
    expect(rest).toEqual([]);
    expect(error?.message).toMatch(
      /renders 1 of \d+ checked rows longer than model tiny-qwen25vl reads \(64 tokens: training\.max_length and the model's positions\), up to 90/,
    );
    expect(error?.field).toBe('axes.task[0]');

    const refused = await checkHfLengths(plan, async (jobs) =>
      jobs.map((j) => ({
        rows: j.rows.length,
        limit: 4096,
        longest: 90,
        over: [],
        over_count: 0,
        image_refused: "196x140 = 27440 pixels, over the image processor's max_pixels 20000",
      })),
    );
    expect(refused.map((e) => e.field)).toEqual(['axes.task[0]']);
    expect(refused[0]?.message).toMatch(
      /hf-vlm-audit\.yaml:\d+:\d+: axes\.task\[0\]: task gui-grounding\/196x140 draws images model tiny-qwen25vl would not take as they are: 196x140 = 27440 pixels, over the image processor's max_pixels 20000$/,
    );
  });
});
