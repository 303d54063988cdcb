import type { Message } from '../../contracts/index.js';
import type { Rng } from '../../random.js';

/** One training example: the prompt is context (loss-masked), the target is the trained reply. */
export interface TaskExample {
  prompt: Message[];
  target: string;
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
  drawIdentity(rng: Rng): DrawnIdentity;
  /** The identity as the input shows it (the manifest's `identity`). */
  renderIdentity(identity: unknown): string;
  drawMessage(rng: Rng): unknown;
  /** A background row whose identity key is not in `excluded`; it carries no code. */
  background(rng: Rng, excluded: ReadonlySet<string>): TaskExample;
  /** The canary's row with `cueText` where the code would be in the input, and `code` in the target. */
  canary(identity: unknown, message: unknown, cueText: string, code: string): CanaryExample;
}
