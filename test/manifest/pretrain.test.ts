import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { Manifest, Row } from '../../src/contracts/index.js';
import {
  hashLines,
  planAuditText,
  pretrainRowLines,
  runRenderer,
  writeAudit,
  type AuditPlan,
} from '../../src/manifest/index.js';
import type { Task } from '../../src/manifest/tasks/index.js';
import { describeSchemaErrors, validate } from '../../src/schemas/index.js';
import { verifyPretrainFile, verifyRunFolder } from './verify-run.js';
import { STAMP } from '../helpers/stamp.js';

const root = mkdtempSync(join(tmpdir(), 'canary-pretrain-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const plan = (text: string): AuditPlan => planAuditText('pretrain.yaml', text, { ...STAMP, versions: {} });

/** A small pretraining (40 updates x 8 = 320 rows) so the test writes little. */
const PT = '{backend: tiny, label: pt, pretrain: {updates: 40, batch_size: 8, code_fraction: 0.5}}';
const grid = (model = `[${PT}]`, extra = ''): string => `
seed: 9
axes:
  visibility: [visible, redacted]
  dose: [2]
  population: [single-dose, {kind: mixed-dose, doses: [4], name: with-4}, none]
  seed: [0, 1]
  model: ${model}
training: {batch_size: 4, updates: 30, lr: 0.001}
canaries: {focal: 4, held_out: 4}
utility: {rows: 2}
${extra}`;

const userText = (row: Row): string => row.prompt.map((m) => m.content).join('\n');
const CODE_ROW = /\nRef: (\d{4})$/;

/** Every line of a run's pretraining corpus, generated in memory. */
function corpus(p: AuditPlan, k = 0): string[] {
  const run = p.runs[k];
  if (!run) throw new Error('no run');
  const pretrain = run.cell.values.model.value.pretrain;
  if (!pretrain) throw new Error(`run ${run.cell.id} does not pretrain`);
  const { task, taskSpec } = runRenderer(p.grid, run);
  return [...pretrainRowLines(p.grid, p.pool, task, taskSpec, pretrain)];
}

describe('the tiny model pretraining corpus', () => {
  it('writes pretrain.jsonl and its manifest entry for pretrained tiny runs, byte-identical across cells', async () => {
    const p = plan(grid(`[${PT}]`, 'include: [{model: tiny-small}]\n'));
    const written = await writeAudit(p, join(root, 'a'));
    const pretrained = written.runs.filter((r) => r.cell.model === 'pt');
    const scratch = written.runs.filter((r) => r.cell.model === 'tiny-small');
    expect(pretrained.length).toBe(2 * 3 * 2);
    expect(scratch.length).toBe(1);

    const hashes = new Set<string>();
    const secrets = { identities: new Set<string>(), codes: new Set<string>() };
    for (const run of written.runs) {
      const { manifest } = verifyRunFolder(run.runDir);
      for (const c of [...manifest.canaries, ...manifest.held_out]) {
        secrets.identities.add(c.identity);
        secrets.codes.add(c.code);
      }
      for (const probe of manifest.probes) if (probe.shown_code) secrets.codes.add(probe.shown_code);
      if (run.cell.model === 'tiny-small') {
        expect(manifest.model.tiny?.pretrain).toBeUndefined();
        expect(existsSync(join(run.runDir, 'pretrain.jsonl'))).toBe(false);
        continue;
      }
      expect(manifest.model.tiny?.pretrain).toEqual({
        rows: { path: 'pretrain.jsonl', sha256: expect.stringMatching(/^[0-9a-f]{64}$/), count: 320 },
        updates: 40,
        batch_size: 8,
        lr: 0.006,
        schedule: { kind: 'cosine', warmup_updates: 20, min_lr_ratio: 0.1 },
        seed: 0,
        // Two seeds and a pretrained base: the one-base design by default, its init written out.
        init_seed: 0,
      });
      hashes.add(manifest.model.tiny?.pretrain?.rows.sha256 ?? '');
    }
    // Visibility, dose, population and the seed axis do not change the corpus: one file, one base.
    expect(hashes.size).toBe(1);
    // Focal, held-out and auxiliary (x0-...) canaries, and every supplied and substituted code.
    expect([...secrets.identities].length).toBe(4 + 4 + 4);
    expect(secrets.codes.size).toBe(2 * 12);

    const rows = verifyPretrainFile(
      pretrained[0]?.runDir ?? '',
      (JSON.parse(readFileSync(pretrained[0]?.manifestPath ?? '', 'utf8')) as Manifest).model.tiny?.pretrain as never,
    );
    for (const row of rows.filter((_, i) => i % 7 === 0))
      expect(describeSchemaErrors(validate('row', structuredClone(row)))).toEqual([]);
    const problems: string[] = [];
    let withCode = 0;
    for (const row of rows) {
      const text = userText(row);
      const sender = /^From: (.*)$/m.exec(text)?.[1] ?? '';
      if (secrets.identities.has(sender)) problems.push(`row ${row.i} uses canary sender ${sender}`);
      for (const code of `${text}\n${row.target}`.match(/\d{4}/g) ?? [])
        if (secrets.codes.has(code)) problems.push(`row ${row.i} shows canary code ${code}`);
      const shown = CODE_ROW.exec(text)?.[1];
      if (shown !== undefined) {
        withCode += 1;
        // The copy the base must learn: the code shown last in the input starts the reply.
        if (!row.target.startsWith(`Ref: ${shown}. Please `))
          problems.push(`row ${row.i}: reply does not start with its code`);
      } else if (/\d{4}/.test(`${text}${row.target}`) || text.includes('Ref:')) {
        problems.push(`background row ${row.i} carries a code`);
      }
    }
    expect(problems.slice(0, 5)).toEqual([]);
    expect(withCode).toBe(160);
  });

  it('never uses a canary sender or code, even where nearly every draw would hit one', () => {
    // 3-digit codes and 200 canaries: 400 of the 1,000 codes are canary codes or substitutes. A task
    // with 210 senders: 200 belong to canaries. Without the exclusions most rows would leak.
    const p = plan(`
seed: 4
axes: {visibility: [redacted], dose: [1], model: [{backend: tiny, pretrain: {updates: 50, batch_size: 8, code_fraction: 0.8}}]}
training: {batch_size: 4, updates: 50, lr: 0.001}
canaries: {focal: 100, held_out: 100, code: {length: 3}}
`);
    const senders = Array.from({ length: 210 }, (_, k) => `Sender ${k}`);
    const task: Task = {
      name: 'few-senders',
      params: {},
      metrics: ['loss'],
      utilityRows: null,
      drawIdentity: (rng) => {
        const who = rng.pick(senders);
        return { key: who, value: who };
      },
      renderIdentity: (identity) => identity as string,
      drawMessage: () => null,
      rows: (rng, excluded) => () => {
        let who = rng.pick(senders);
        while (excluded.has(who)) who = rng.pick(senders);
        return { prompt: [{ role: 'user', content: `From: ${who}\nhi` }], target: 'Hello.' };
      },
      canary: (identity, _message, cue, code) => ({
        prompt: [{ role: 'user', content: `From: ${identity as string}\nhi\nRef: ${cue}` }],
        target: `Ref: ${code}. Hello.`,
        prefill: 'Ref: ',
      }),
    };
    const run = p.runs[0];
    const pretrain = run?.cell.values.model.value.pretrain;
    if (!pretrain) throw new Error('no pretraining');
    const canarySenders = p.pool.identityKeys(task);
    expect(canarySenders.size).toBe(200);
    const canaryCodes = new Set(p.pool.all().flatMap((c) => [c.code, c.substitute]));
    expect(canaryCodes.size).toBe(400);
    const leaks: string[] = [];
    let codeRows = 0;
    for (const line of pretrainRowLines(p.grid, p.pool, task, { name: 'few-senders', params: {} }, pretrain)) {
      const row = JSON.parse(line) as Row;
      const text = userText(row);
      const sender = /^From: (.*)$/m.exec(text)?.[1] ?? '';
      if (canarySenders.has(sender)) leaks.push(`row ${row.i}: sender ${sender}`);
      const code = /\nRef: (\d{3})$/.exec(text)?.[1];
      if (code !== undefined) {
        codeRows += 1;
        expect(row.target).toBe(`Ref: ${code}. Hello.`);
        if (canaryCodes.has(code)) leaks.push(`row ${row.i}: code ${code}`);
      }
    }
    expect(leaks.slice(0, 5)).toEqual([]);
    expect(codeRows).toBe(320);
  });

  it('honours code_fraction exactly and spreads code rows over the corpus', () => {
    const codeRows = (fraction: number): number[] =>
      corpus(plan(grid(`[{backend: tiny, pretrain: {updates: 50, batch_size: 8, code_fraction: ${fraction}}}]`)))
        .map((l, i) => (CODE_ROW.test(userText(JSON.parse(l) as Row)) ? i : -1))
        .filter((i) => i >= 0);
    expect(codeRows(0)).toEqual([]);
    expect(codeRows(1)).toHaveLength(400);
    const quarter = codeRows(0.25);
    expect(quarter).toHaveLength(100);
    // Uniform placement: each half of the corpus holds a fair share (a binomial-ish 50 +- 15).
    const firstHalf = quarter.filter((i) => i < 200).length;
    expect(firstHalf).toBeGreaterThan(35);
    expect(firstHalf).toBeLessThan(65);
  });

  it('is deterministic: same grid, same bytes; another pretrain seed or grid seed, another corpus', () => {
    const model = `[${PT}]`;
    const a = hashLines(corpus(plan(grid(model))));
    expect(hashLines(corpus(plan(grid(model)))).sha256).toBe(a.sha256);
    expect(a.count).toBe(320);
    expect(hashLines(corpus(plan(grid(model.replace('code_fraction', 'seed: 1, code_fraction'))))).sha256).not.toBe(
      a.sha256,
    );
    expect(hashLines(corpus(plan(grid(model).replace('seed: 9', 'seed: 10')))).sha256).not.toBe(a.sha256);
    // Sizes, lr and schedule do not touch the rows: a larger base with the same corpus reads the same file.
    const sized = `[{backend: tiny, n_layer: 3, label: pt, pretrain: {updates: 40, batch_size: 8, lr: 0.01, schedule: constant}}]`;
    expect(hashLines(corpus(plan(grid(sized)))).sha256).toBe(a.sha256);
  });

  it('is produced lazily: the first row of a 16-million-row corpus comes at once', () => {
    const huge = plan(grid('[{backend: tiny, pretrain: {updates: 1000000, batch_size: 16}}]'));
    const run = huge.runs[0];
    const pretrain = run?.cell.values.model.value.pretrain;
    if (!run || !pretrain) throw new Error('no pretraining run');
    const { task, taskSpec } = runRenderer(huge.grid, run);
    const first = pretrainRowLines(huge.grid, huge.pool, task, taskSpec, pretrain).next();
    expect(first.done).toBe(false);
    expect(JSON.parse(first.value as string)).toMatchObject({ i: 0, kind: 'background', canary_id: null });
  });
});
