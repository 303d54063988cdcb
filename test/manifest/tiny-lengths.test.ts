// tier: slow (Python)
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { Manifest, Message } from '../../src/contracts/index.js';
import { planAudit, writeAudit } from '../../src/manifest/index.js';
import { tinyTokens } from '../../src/manifest/length-check.js';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { trainerPython } from '../../src/runner/python.js';

/**
 * The plan-time length check counts tiny-model tokens in TypeScript; the trainer's character
 * tokenizer (trainer-py/canary_trainer/backends/tiny_tokenizer.py) renders and encodes the same rows
 * in Python. Both must give the same count for every row a plan writes: training rows (background
 * and canaries, every cue), utility rows and probes (prompt + prefill + a code and its end marker).
 */
const root = mkdtempSync(join(tmpdir(), 'canary-lengths-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const GRID = `name: lengths
seed: 11
axes:
  visibility: [visible, redacted, encoded:chained-fruit, encoded:binary]
  dose: [2]
  model: [tiny-small]
  task: [{name: synthetic-email, style: compact}]
training: {batch_size: 4, updates: 20, lr: 0.001}
canaries: {focal: 3, held_out: 2}
probes: {kinds: [hidden, supplied, substituted], decode: [prefill, free]}
utility: {rows: 6}
`;

const PY = `
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("tiny_tokenizer", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
tok = mod.CharTokenizer()
rows = json.load(sys.stdin)
print(json.dumps([len(tok.encode(tok.render(r["prompt"], r["target"]))) for r in rows]))
`;

describe('tiny-model row lengths', () => {
  it('the TypeScript count equals the trainer tokenizer on every row and probe of a plan', async () => {
    const gridPath = join(root, 'lengths.yaml');
    writeFileSync(gridPath, GRID);
    const written = await writeAudit(await planAudit(gridPath), join(root, 'artifacts'));
    const rows: { prompt: Message[]; target: string }[] = [];
    for (const run of written.runs) {
      const manifest = JSON.parse(readFileSync(run.manifestPath, 'utf8')) as Manifest;
      for (const file of ['rows.jsonl', 'utility.jsonl']) {
        for (const line of readFileSync(join(run.runDir, file), 'utf8').split('\n')) {
          if (line !== '') rows.push(JSON.parse(line) as { prompt: Message[]; target: string });
        }
      }
      for (const p of manifest.probes) rows.push({ prompt: p.prompt, target: `${p.prefill}0000` });
    }
    expect(rows.length).toBeGreaterThan(400);
    const tokenizer = join(PACKAGE_ROOT, 'trainer-py', 'canary_trainer', 'backends', 'tiny_tokenizer.py');
    const python = JSON.parse(
      execFileSync(trainerPython(), ['-c', PY, tokenizer], { input: JSON.stringify(rows), encoding: 'utf8' }),
    ) as number[];
    expect(rows.map((r) => tinyTokens(r.prompt, r.target))).toEqual(python);
  });
});
