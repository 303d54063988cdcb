import type { FileRef, TinyPretrainSpec } from '../contracts/index.js';
import { canonicalJson } from '../hash.js';
import { codeSpaceOf, pretrainRows, type LoadedGrid, type PretrainValue } from '../grid/index.js';
import type { CanaryPool } from './canaries.js';
import type { CodeSpace } from '../codes/index.js';
import { cueEncoding } from '../codes/index.js';
import { Rng } from '../random.js';
import type { TaskSpec } from './tasks/index.js';
import type { Task } from './tasks/task.js';

/**
 * The tiny model's pretraining corpus (pretrain.jsonl): what turns a randomly initialised model
 * into the analog of a pretrained LM that copies a code it is shown. Built from the task's own
 * generators on a stream of its own: `code_fraction` of the rows (exactly, rounded) are
 * visible-cue rows of the task's canary shape, a random sender and message with a random code
 * shown in the input and written at the start of the reply; the rest are background rows.
 *
 * Nothing of the audit's canaries leaks into it: no sender of a focal, held-out or auxiliary
 * canary, and no code that is a canary's code or a probe's substitute. Those sets are the grid's
 * whole pool, the same in every cell, so every run of an audit with the same task and pretraining
 * settings gets identical bytes, and the trainer's base (cached by content) is trained once per
 * model size and seed.
 * Rows are produced lazily, like rows.jsonl, so memory does not grow with the corpus.
 */
export const PRETRAIN_FILE = 'pretrain.jsonl';

/** Identifies a corpus: runs with equal keys get byte-identical files. */
export function pretrainCorpusKey(taskSpec: TaskSpec, p: PretrainValue): string {
  return canonicalJson({ task: taskSpec, rows: pretrainRows(p), code_fraction: p.code_fraction, seed: p.seed });
}

export function* pretrainRowLines(
  grid: LoadedGrid,
  pool: CanaryPool,
  task: Task,
  taskSpec: TaskSpec,
  p: PretrainValue,
): Generator<string> {
  const space = codeSpaceOf(grid.doc);
  const visible = cueEncoding({ scheme: 'visible' }, space);
  const excludedSenders = pool.identityKeys(task);
  const excludedCodes = new Set(pool.all().flatMap((c) => [c.code, c.substitute]));
  const rng = new Rng(grid.doc.seed, 'pretrain', canonicalJson(taskSpec), p.seed);
  const total = pretrainRows(p);
  // Sequential selection (Knuth's algorithm S): exactly `need` code rows, spread uniformly,
  // decided row by row without holding the corpus.
  let need = Math.round(p.code_fraction * total);
  const background = task.pretrain ? task.pretrain.rows(rng) : task.rows(rng, excludedSenders, 'train');
  // A task's own canary shape shows the code as the visible scheme draws it (an image task draws
  // it in the source region; text tasks read the cue text alone).
  const canary = task.pretrain
    ? task.pretrain.canary
    : (identity: unknown, message: unknown, cueText: string, code: string) =>
        task.canary(identity, message, cueText, code, 'visible');
  for (let i = 0; i < total; i += 1) {
    const withCode = need > 0 && rng.int(total - i) < need;
    let prompt;
    let target;
    if (withCode) {
      need -= 1;
      let sender = task.drawIdentity(rng);
      while (excludedSenders.has(sender.key)) sender = task.drawIdentity(rng);
      const code = drawFreeCode(space, rng, excludedCodes);
      ({ prompt, target } = canary(sender.value, task.drawMessage(rng), visible.encode(code), code));
    } else {
      ({ prompt, target } = background());
    }
    yield JSON.stringify({ i, kind: 'background', canary_id: null, prompt, target });
  }
}

/**
 * A uniform code outside `excluded`. The pool takes at most half the space (each canary and its
 * substitute), so this ends after two draws on average.
 */
function drawFreeCode(space: CodeSpace, rng: Rng, excluded: ReadonlySet<string>): string {
  for (;;) {
    let code = '';
    for (let k = 0; k < space.length; k += 1) code += space.alphabet[rng.int(space.alphabet.length)] as string;
    if (!excluded.has(code)) return code;
  }
}

/** The manifest entry for a written corpus. */
export function pretrainManifestSpec(p: PretrainValue, rows: FileRef): TinyPretrainSpec {
  return {
    rows,
    updates: p.updates,
    batch_size: p.batch_size,
    lr: p.lr,
    schedule: {
      kind: p.schedule.kind,
      warmup_updates: p.schedule.warmup_updates,
      min_lr_ratio: p.schedule.min_lr_ratio,
    },
    seed: p.seed,
    ...(p.init_seed !== undefined ? { init_seed: p.init_seed } : {}),
  };
}
