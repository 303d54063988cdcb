import type { DatasetProvenance, Message, UtilityMetric } from '../../contracts/index.js';

export type { UtilityMetric };
import type { Rng } from '../../random.js';
import type { ImageStore } from '../images/index.js';

/** One training example: the prompt is context (loss-masked), the target is the trained reply. */
export interface TaskExample {
  prompt: Message[];
  target: string;
  /** Grounding rows: the target element's box [x0, y0, x1, y1] in the image's pixels. */
  box?: [number, number, number, number];
}

/** A canary example: `target === prefill + code + suffix`, so scoring conditions on `prefill`. */
export interface CanaryExample extends TaskExample {
  prefill: string;
}

/** A record's identity: `key` is unique per identity and shared by every style of a task family. */
export interface DrawnIdentity {
  key: string;
  value: unknown;
}

/** Which stream a row source serves: background rows to train on, or held-out utility rows. */
export type RowPurpose = 'train' | 'utility';

/**
 * A task generator: deterministic training rows from seeded streams. Identities are drawn per task
 * family (so every style of the synthetic email task shows a canary with the same sender); the
 * message of a canary is drawn once and repeated at every appearance.
 */
export interface Task {
  /** Registry name, e.g. synthetic-email. */
  readonly name: string;
  /** Recorded in the manifest's task.params. */
  readonly params: Record<string, unknown>;
  /** Utility metrics, `loss` first. */
  readonly metrics: readonly UtilityMetric[];
  /**
   * Distinct utility rows the task can give (a dataset's utility split), or null when the stream
   * never runs out (generated tasks).
   */
  readonly utilityRows: number | null;
  /** Distinct training rows a dataset-backed task gives (after its hold-out); absent for generated tasks. */
  readonly trainRows?: number;
  /** Utility rows a task's own `utility` source asks for (`utility.rows`), over the grid's utility.rows. */
  readonly utilityRowsWanted?: number;
  /** Where a dataset-backed task's rows came from (the manifest's task.dataset). */
  readonly dataset?: DatasetProvenance;
  /** Where the utility rows came from when a task names a utility source apart (the manifest's task.utility_dataset). */
  readonly utilityDataset?: DatasetProvenance;
  drawIdentity(rng: Rng): DrawnIdentity;
  /** The identity as the input shows it (the manifest's `identity`). */
  renderIdentity(identity: unknown): string;
  drawMessage(rng: Rng): unknown;
  /**
   * A row source: each call gives the next row of the stream, drawing from `rng` as it goes. Rows
   * carry no code and no identity in `excluded`. The background sequence of an audit is the
   * `train` source of one seeded stream; utility rows the `utility` source of another.
   */
  rows(rng: Rng, excluded: ReadonlySet<string>, purpose: RowPurpose): () => TaskExample;
  /**
   * The canary's row with `cueText` where the code would be in the input, and `code` in the target.
   * `scheme`: the visibility scheme that produced `cueText` (an image task draws the cue with that
   * scheme's region renderer); null for a hidden-code probe (an image task masks the region).
   */
  canary(identity: unknown, message: unknown, cueText: string, code: string, scheme?: string | null): CanaryExample;
  /**
   * Rows of the tiny model's pretraining corpus when they must differ from training's: a dataset
   * task's base must not learn the task itself (utility before fine-tuning would not be a
   * baseline), so it pretrains on its texts and on code copying only. Absent: `rows` and `canary`.
   */
  pretrain?: {
    rows(rng: Rng): () => TaskExample;
    canary(identity: unknown, message: unknown, cueText: string, code: string): TaskExample;
  };
  /** Image tasks: the images their rows name, rendered as the rows are made. */
  readonly images?: ImageStore;
  /** Every distinct row a dataset-backed task can emit (plan-time length checks); absent for generated tasks. */
  allRows?(): Iterable<TaskExample>;
}
