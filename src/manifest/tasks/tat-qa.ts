import type { DatasetRecord } from '../../contracts/index.js';
import type { DatasetPreset } from './dataset/task.js';
import { TaskSpecError } from './dataset/records.js';

/**
 * TAT-QA (next-tat/TAT-QA): questions over a financial report's table and paragraphs. The files
 * hold documents ({table, paragraphs, questions}); each question becomes one row with columns
 * `table` (one line per table row, cells joined by " | "), `paragraphs` (in their order),
 * `question`, `answer` (a list joined by ", "), `scale`, `answer_type`, and `answer_scaled`: the
 * answer with its scale word (the study's strict answer-and-scale accuracy). Utility is exact
 * match and token F1 against `answer_scaled`.
 */
export const TAT_QA: DatasetPreset = {
  name: 'tat-qa',
  defaults: {
    source: { repo: 'next-tat/TAT-QA', files: { train: 'tatqa_dataset_train.json', dev: 'tatqa_dataset_dev.json' } },
    train_split: 'train',
    utility_split: 'dev',
    utility_holdout: 0.1,
    input: 'Table:\n{table}\n\nText:\n{paragraphs}\n\nQuestion: {question}',
    target: 'answer_scaled',
    system:
      'Answer the question from the table and the text. Give only the answer, followed by its scale (thousand, million, billion or percent) when it has one.',
    canary: { input: '{input}\nClient: {identity}\nReference code: {cue}', target: 'Reference code: {code}\n{target}' },
    metrics: ['loss', 'exact_match', 'token_f1'],
  },
  records: (documents, split) => documents.flatMap((doc, d) => questionRows(doc, d, split)),
};

interface TatDocument {
  table?: { uid?: string; table?: unknown[][] };
  paragraphs?: { uid?: string; order?: number; text?: string }[];
  questions?: {
    uid?: string;
    order?: number;
    question?: string;
    answer?: unknown;
    answer_type?: string;
    scale?: string;
  }[];
}

function questionRows(record: DatasetRecord, d: number, split: string): DatasetRecord[] {
  const doc = record as TatDocument;
  if (!Array.isArray(doc.questions) || !doc.table || !Array.isArray(doc.table.table)) {
    throw new TaskSpecError(
      `document ${d} of split ${split} is not a TAT-QA document (it needs table.table and questions); columns: ${Object.keys(record).join(', ')}`,
      ['source'],
    );
  }
  const table = doc.table.table.map((row) => row.map((cell) => String(cell ?? '').trim()).join(' | ')).join('\n');
  const paragraphs = [...(doc.paragraphs ?? [])]
    .sort((a, b) => (a.order ?? 0) - (b.order ?? 0))
    .map((p) => p.text ?? '')
    .join('\n');
  return [...doc.questions]
    .sort((a, b) => (a.order ?? 0) - (b.order ?? 0))
    .map((q, k) => {
      if (typeof q.question !== 'string' || q.answer === undefined)
        throw new TaskSpecError(`question ${k} of document ${d} (split ${split}) has no question or answer`, [
          'source',
        ]);
      const answer = Array.isArray(q.answer)
        ? q.answer.map((a) => String(a).trim()).join(', ')
        : String(q.answer).trim();
      const scale = q.scale ?? '';
      return {
        uid: q.uid ?? `${d}.${k}`,
        table,
        paragraphs,
        question: q.question,
        answer,
        scale,
        answer_type: q.answer_type ?? '',
        answer_scaled: scale ? `${answer} ${scale}` : answer,
      };
    });
}
