import { describe, expect, it } from 'vitest';
import type { TaskData } from '../../src/contracts/index.js';
import { Rng } from '../../src/random.js';
import { createTask, taskDataRequest, TaskSpecError } from '../../src/manifest/tasks/index.js';
import { planAuditTextWithData, TaskDataError } from '../../src/manifest/index.js';
import { parseTemplate, renderBefore, renderTemplate } from '../../src/manifest/tasks/dataset/template.js';

const NAMES = ['activate_my_card', 'age_limit', 'card_arrival', 'lost_or_stolen_card'];

function banking(train = 40, test = 12, labels: number[] = [0, 1, 2, 3]): TaskData {
  const row = (split: string, k: number): Record<string, unknown> => ({
    text: `${split} message ${k} about ${NAMES[labels[k % labels.length] as number]}`,
    label: labels[k % labels.length],
  });
  return {
    splits: {
      train: Array.from({ length: train }, (_, k) => row('train', k)),
      test: Array.from({ length: test }, (_, k) => row('test', k)),
    },
    features: { label: { names: NAMES } },
    provenance: {
      source: 'hub',
      repo: 'PolyAI/banking77',
      revision: 'main',
      sha: 'a'.repeat(40),
      config: null,
      files: [],
    },
  };
}

const text = (ex: { prompt: { content: string }[]; target: string }): string =>
  `${ex.prompt.map((m) => m.content).join('\n')}\n${ex.target}`;

describe('field templates', () => {
  it('names a column whole, renders fields and literal braces, and splits at a field', () => {
    expect(parseTemplate('text', { column: true }).fields).toEqual(['text']);
    expect(parseTemplate('text').fields).toEqual([]);
    const t = parseTemplate('Q: {question} {{x}} -> {code}.');
    expect(t.fields).toEqual(['question', 'code']);
    expect(renderTemplate(t, { question: 'why', code: '0427' })).toBe('Q: why {x} -> 0427.');
    expect(renderBefore(t, 'code', { question: 'why' })).toBe('Q: why {x} -> ');
    expect(() => parseTemplate('a {b')).toThrow(/never closed/);
    expect(() => parseTemplate('a } b')).toThrow(/without its \{/);
    expect(() => parseTemplate('{bad name}')).toThrow(/not a field name/);
  });
});

describe('banking77 preset', () => {
  const spec = { name: 'banking77', params: {} };

  it('asks for the Hub repository and the train and test splits', () => {
    expect(taskDataRequest(spec)).toEqual({ source: { repo: 'PolyAI/banking77' }, splits: ['train', 'test'] });
    expect(taskDataRequest({ name: 'synthetic-email', params: { style: 'compact' } })).toBeNull();
  });

  it('renders the label as its class name, records provenance and the accuracy metric', () => {
    const task = createTask(spec, banking());
    expect(task.metrics).toEqual(['loss', 'accuracy']);
    expect(task.utilityRows).toBe(12);
    expect(task.dataset?.repo).toBe('PolyAI/banking77');
    const next = task.rows(new Rng('bg'), new Set(), 'train');
    const row = next();
    expect(NAMES).toContain(row.target);
    expect(row.prompt[0]?.role).toBe('system');
    expect(row.prompt[1]?.content).toMatch(/^train message \d+ about /);
  });

  it('trains in epochs: each epoch is a permutation of the whole train split, fixed by the stream', () => {
    const task = createTask(spec, banking(40));
    const a = task.rows(new Rng('bg'), new Set(), 'train');
    const b = task.rows(new Rng('bg'), new Set(), 'train');
    const first = Array.from({ length: 40 }, () => a().prompt[1]?.content);
    expect(new Set(first).size).toBe(40);
    expect(Array.from({ length: 40 }, () => b().prompt[1]?.content)).toEqual(first);
    const second = Array.from({ length: 40 }, () => a().prompt[1]?.content);
    expect(new Set(second)).toEqual(new Set(first));
    expect(second).not.toEqual(first);
  });

  it('puts identity and cue in the input, the code right after the prefill, the prefill independent of the cue', () => {
    const task = createTask(spec, banking());
    const rng = new Rng('canary');
    for (let k = 0; k < 20; k += 1) {
      const identity = task.drawIdentity(rng);
      const message = task.drawMessage(rng);
      const row = task.canary(identity.value, message, '[REDACTED]', '0427');
      const input = row.prompt.at(-1)?.content ?? '';
      expect(input).toContain('[REDACTED]');
      expect(input).toContain(task.renderIdentity(identity.value));
      expect(input).not.toContain('0427');
      expect(row.target.startsWith(`${row.prefill}0427`)).toBe(true);
      expect(task.canary(identity.value, message, '0427', '0427').prefill).toBe(row.prefill);
    }
  });

  it('refuses a label outside the class names, naming the row and split', () => {
    expect(() => createTask(spec, banking(8, 4, [0, 7]))).toThrow(
      /row 1 of split train of PolyAI\/banking77@a{12}: label = 7 is outside the 4 class names/,
    );
  });

  it('refuses a split the dataset does not have, listing the ones it has', () => {
    expect(() => createTask({ name: 'banking77', params: { utility_split: 'validation' } }, banking())).toThrow(
      /no split "validation"; it has "train", "test"/,
    );
  });
});

describe('the generic dataset task', () => {
  const data: TaskData = {
    splits: { train: Array.from({ length: 50 }, (_, k) => ({ q: `question ${k}`, a: `answer ${k}` })) },
    features: {},
    provenance: { source: 'local', path: '/data/qa.jsonl', files: [] },
  };
  const params = { source: { path: '/data/qa.jsonl' }, input: 'Q: {q}', target: 'a' };

  it('holds out a seeded fraction of the train split for utility, never trained on', () => {
    const task = createTask({ name: 'dataset', params }, data);
    expect(task.utilityRows).toBe(5);
    const train = task.rows(new Rng('t'), new Set(), 'train');
    const util = task.rows(new Rng('u'), new Set(), 'utility');
    const trained = new Set(Array.from({ length: 45 }, () => train().target));
    const held = new Set(Array.from({ length: 5 }, () => util().target));
    expect(trained.size).toBe(45);
    expect(held.size).toBe(5);
    for (const t of held) expect(trained.has(t)).toBe(false);
    // The same draw every time.
    const again = createTask({ name: 'dataset', params }, data).rows(new Rng('u'), new Set(), 'utility');
    expect(new Set(Array.from({ length: 5 }, () => again().target))).toEqual(held);
    // Fixed by the data, not by where it sits: the same files elsewhere hold out the same rows.
    const moved = createTask(
      { name: 'dataset', params: { ...params, source: { path: '/elsewhere/qa.jsonl' } } },
      { ...data, provenance: { ...data.provenance, path: '/elsewhere/qa.jsonl' } },
    );
    const movedUtility = moved.rows(new Rng('u'), new Set(), 'utility');
    expect(new Set(Array.from({ length: 5 }, () => movedUtility().target))).toEqual(held);
  });

  it('names the missing column and the columns a row has', () => {
    expect(() => createTask({ name: 'dataset', params: { ...params, target: 'answer' } }, data)).toThrow(
      /target "answer" reads column "answer", which row 0 of split train of \/data\/qa.jsonl does not have \(it has "q", "a"\)/,
    );
  });

  it('checks the canary templates: one {cue} in the input, one {code} in the reply, no code in the input', () => {
    const bad = (canary: Record<string, string>): unknown => {
      try {
        createTask({ name: 'dataset', params: { ...params, canary } }, data);
      } catch (error) {
        return error;
      }
      return null;
    };
    expect(bad({ input: '{input}' })).toBeInstanceOf(TaskSpecError);
    expect((bad({ input: '{input}' }) as TaskSpecError).field).toEqual(['canary', 'input']);
    expect(String(bad({ target: '{code} {code}' }))).toMatch(/\{code\} exactly once \(it writes it 2 times\)/);
    expect(String(bad({ input: '{input} {cue} {code}' }))).toMatch(/\{code\} cannot appear in the canary input/);
    expect(String(bad({ target: 'Ref {code} {nope}' }))).toMatch(/reads \{nope\}, which is neither a placeholder/);
    expect(String(bad({}))).toBe('null');
  });
});

describe('tat-qa preset', () => {
  const doc = {
    table: {
      uid: 't1',
      table: [
        ['', '2019', '2018'],
        ['Revenue', '1,200', '1,000'],
      ],
    },
    paragraphs: [
      { uid: 'p2', order: 2, text: 'Second.' },
      { uid: 'p1', order: 1, text: 'First.' },
    ],
    questions: [
      { uid: 'q2', order: 2, question: 'What is the change?', answer: 20, answer_type: 'arithmetic', scale: 'percent' },
      { uid: 'q1', order: 1, question: 'Which years?', answer: ['2019', '2018'], answer_type: 'multi-span', scale: '' },
    ],
  };
  const data: TaskData = {
    splits: { train: [doc, doc], dev: [doc] },
    features: {},
    provenance: { source: 'local', path: '/tat', files: [] },
  };

  it('makes one row per question, with the table, the paragraphs in order and the scaled answer', () => {
    const task = createTask({ name: 'tat-qa', params: {} }, data);
    expect(task.metrics).toEqual(['loss', 'exact_match', 'token_f1']);
    expect(task.utilityRows).toBe(2);
    const util = task.rows(new Rng('u'), new Set(), 'utility');
    const rows = [util(), util()];
    expect(rows.map((r) => r.target).sort()).toEqual(['20 percent', '2019, 2018']);
    expect(text(rows[0] as never)).toContain('Revenue | 1,200 | 1,000');
    expect(text(rows[0] as never)).toContain('First.\nSecond.');
  });

  it('refuses a record that is not a TAT-QA document', () => {
    expect(() =>
      createTask({ name: 'tat-qa', params: {} }, { ...data, splits: { train: [{ text: 'x' }], dev: [doc] } }),
    ).toThrow(/document 0 of split train is not a TAT-QA document/);
  });
});

describe('planning a dataset-backed grid', () => {
  const grid = (focal: number): string => `name: numbers
axes:
  visibility: [redacted]
  dose: [1]
  model: [tiny-small]
  task: [{name: dataset, source: {path: ./rows.jsonl}, input: q, target: a, system: null}]
training: {batch_size: 4, updates: 20, lr: 0.001}
canaries: {focal: ${focal}, held_out: 8}
`;
  const rows = (n: number): TaskData => ({
    splits: {
      train: Array.from({ length: n }, (_, k) => ({
        q: `Where is order ${String(k).padStart(4, '0')}?`,
        a: 'Shipped.',
      })),
    },
    features: {},
    provenance: { source: 'local', path: '/data/rows.jsonl', files: [] },
  });

  it('never gives a canary (or a substitute) a code the dataset shows', async () => {
    const plan = await planAuditTextWithData('/tmp/numbers.yaml', grid(8), async () => rows(5000));
    const codes = plan.pool.all().flatMap((c) => [c.code, c.substitute]);
    expect(codes).toHaveLength(32);
    for (const code of codes) expect(Number(code)).toBeGreaterThanOrEqual(5000);
  });

  it('says so when the dataset leaves too few codes', async () => {
    await expect(planAuditTextWithData('/tmp/numbers.yaml', grid(8), async () => rows(9990))).rejects.toThrow(
      /16 canaries need 32 distinct codes \(each with a substitute\) but the code space holds 10 once the 9990 codes in the task's dataset are left out/,
    );
  });

  it("reports a loader error at the task in the grid, with the loader's code", async () => {
    const error = await planAuditTextWithData('/tmp/numbers.yaml', grid(8), async () => {
      throw new TaskDataError('revision "v9" of org/data does not exist', ['source', 'revision'], 'E_DATASET_REVISION');
    }).catch((e: unknown) => e);
    expect(String(error)).toMatch(
      /\/tmp\/numbers.yaml:6:\d+: axes.task\[0\].source.revision: task dataset\/rows.jsonl: revision "v9" of org\/data does not exist/,
    );
    expect((error as { errors: { code: string }[] }).errors.map((e) => e.code)).toEqual(['E_DATASET_REVISION']);
  });
});
