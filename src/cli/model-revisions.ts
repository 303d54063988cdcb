import type { ModelRevisions } from '../app/index.js';
import { fetchCommand } from '../hub/index.js';

/** How plan, submit and run show the Hub models they pinned (text, JSON and the opt-out warning). */
export function revisionLines(models: ModelRevisions | undefined): string[] {
  if (!models) return [];
  const lines = models.pins.map((pin) => {
    const from =
      pin.source === 'hub'
        ? 'from the Hub'
        : pin.source === 'given'
          ? 'given as a sha'
          : `from the local cache: ${pin.reason}`;
    const fetch = pin.cached
      ? ''
      : `; not in the local cache, offline workers need: ${fetchCommand(pin.name, pin.sha)}`;
    return `model ${pin.name}@${pin.revision} = ${pin.sha} (${from})${fetch}`;
  });
  return [...lines, ...models.unpinned.map((m) => `model ${m.name}@${m.revision ?? 'main'}: not pinned`)];
}

export function revisionsJson(models: ModelRevisions | undefined): Record<string, unknown>[] {
  if (!models) return [];
  return [
    ...models.pins.map((pin) => ({
      name: pin.name,
      revision: pin.revision,
      sha: pin.sha,
      source: pin.source,
      cached: pin.cached,
      ...(pin.reason ? { reason: pin.reason } : {}),
    })),
    ...models.unpinned.map((m) => ({ name: m.name, revision: m.revision ?? 'main', sha: null, source: 'unpinned' })),
  ];
}

/** One line on stderr when pinning was turned off and some manifest names a moving branch. */
export function warnUnpinned(models: ModelRevisions | undefined): void {
  const names = (models?.unpinned ?? []).map((m) => `${m.name}@${m.revision ?? 'main'}`);
  if (names.length === 0) return;
  process.stderr.write(
    `canary-audit: warning: revisions not pinned (--no-pin-revisions): the manifests name moving branches or tags (${names.join(', ')}); the same audit may train other weights later\n`,
  );
}

/** The option plan, submit and run share. */
export const NO_PIN_OPTION = {
  'no-pin-revisions': {
    type: 'boolean' as const,
    description:
      "Keep each Hub model's branch or tag in the manifests instead of its commit sha (default: pin, asking the Hub ($HF_ENDPOINT), else the local cache). Warns: a branch moves.",
  },
};
