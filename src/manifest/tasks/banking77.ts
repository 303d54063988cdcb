import type { DatasetPreset } from './dataset/task.js';

/**
 * Banking77 (PolyAI/banking77): 13,083 customer messages, each labelled with one of 77 intents;
 * `label` is a class label, so it renders as the intent name (card_arrival, ...). Utility is
 * intent accuracy: the greedy reply must be the label name exactly. A canary is a customer
 * message naming an account holder with a reference code; the reply carries the code, then the
 * intent.
 */
export const BANKING77: DatasetPreset = {
  name: 'banking77',
  defaults: {
    source: { repo: 'PolyAI/banking77' },
    train_split: 'train',
    utility_split: 'test',
    utility_holdout: 0.1,
    input: 'text',
    target: 'label',
    system:
      "Classify the customer's message into one of the bank's 77 intents. Reply with the intent name only, for example card_arrival.",
    canary: {
      input: '{input}\nAccount holder: {identity}\nReference code: {cue}',
      target: 'Reference code: {code}\n{target}',
    },
    metrics: ['loss', 'accuracy'],
  },
};
