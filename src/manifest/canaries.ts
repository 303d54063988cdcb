import { canonicalJson } from '../hash.js';
import { drawCode, sampledCandidates, spaceSize, type CodeSpace } from '../codes/index.js';
import { auxCanaryId, focalCanaryId, heldOutCanaryId } from './population.js';
import { Rng } from '../random.js';
import type { Task, TaskSpec } from './tasks/index.js';

/**
 * The grid's canaries, drawn once from the grid seed so that the same id means the same canary
 * (identity, code, message) in every cell: that is what makes cross-cell comparisons paired.
 * Draw order is focal, held-out, then auxiliary cohorts by index, each from its own stream, so
 * adding an auxiliary cohort never changes the identity or code of a focal or held-out canary.
 */
export interface PoolCanary {
  id: string;
  code: string;
  /** Shown by `substituted` probes: distinct from every canary's code. */
  substitute: string;
  /** Sampled candidate spaces only: the true code and its decoys, in candidate order. */
  candidates?: string[];
}

export interface PoolSizes {
  focal: number;
  heldOut: number;
  /** Canaries per auxiliary cohort index (the largest count any cell asks for). */
  aux: number[];
}

export interface RenderedIdentity {
  key: string;
  value: unknown;
  text: string;
}

/**
 * Randomized inclusion: each of the grid's focal and held-out canaries (in draw order, f000…,
 * then h000…) is inserted by a fair coin of its own, drawn once per grid from the grid seed. The
 * one-run privacy bound (Steinke, Nasr & Jagielski 2023) is valid only for such a draw.
 */
export function randomizedInclusion(seed: number, focal: number, heldOut: number): boolean[] {
  const coin = new Rng(seed, 'inclusion');
  return Array.from({ length: focal + heldOut }, () => coin.int(2) === 1);
}

export class CanaryPool {
  readonly focal: PoolCanary[];
  readonly heldOut: PoolCanary[];
  readonly aux: PoolCanary[][];
  private readonly seed: number;
  private readonly identities = new Map<string, Map<string, { key: string; value: unknown }>>();
  private readonly messages = new Map<string, unknown>();
  private readonly specJson = new WeakMap<TaskSpec, string>();

  /** `avoid`: codes the training data already shows (a dataset's numbers); no canary or substitute gets one. */
  /** `inclusion`: a coin per focal and held-out canary (`randomizedInclusion`); heads are inserted. */
  constructor(
    seed: number,
    space: CodeSpace,
    sizes: PoolSizes,
    decoys?: number,
    avoid: ReadonlySet<string> = new Set(),
    inclusion?: readonly boolean[],
  ) {
    this.seed = seed;
    const total = sizes.focal + sizes.heldOut + sizes.aux.reduce((a, b) => a + b, 0);
    const free = spaceSize(space) - avoid.size;
    if (2 * total > free) {
      throw new RangeError(
        `${total} canaries need ${2 * total} distinct codes (each with a substitute) but the code space holds ${free}${avoid.size > 0 ? ` once the ${avoid.size} codes in the task's dataset are left out` : ''}`,
      );
    }
    const codes = new Rng(seed, 'codes');
    const taken = new Set<string>(avoid);
    const draw = (id: string): PoolCanary => ({ id, code: drawCode(space, codes, taken), substitute: '' });
    this.focal = Array.from({ length: sizes.focal }, (_, j) => draw(focalCanaryId(j)));
    this.heldOut = Array.from({ length: sizes.heldOut }, (_, j) => draw(heldOutCanaryId(j)));
    this.aux = sizes.aux.map((n, k) => Array.from({ length: n }, (_, j) => draw(auxCanaryId(k, j))));
    // Substitutes come after every code is known, so none equals any canary's code.
    const substitutes = new Rng(seed, 'substitutes');
    for (const c of this.all()) c.substitute = drawCode(space, substitutes, taken);
    if (decoys !== undefined) {
      for (const c of this.all())
        c.candidates = sampledCandidates(space, c.code, decoys, new Rng(seed, 'candidates', c.id));
    }
    if (inclusion) {
      const union = [...this.focal, ...this.heldOut];
      this.focal = union.filter((_, i) => inclusion[i] === true);
      this.heldOut = union.filter((_, i) => inclusion[i] !== true);
    }
  }

  /**
   * The same canaries (ids, identities, messages, roles) with secrets drawn from another space,
   * each with `decoys` sampled candidates: a canary design's pool (src/manifest/designs.ts). The
   * identities and messages stay shared, so a canary differs between designs in its secret only.
   * `tag` names the design in the streams, so each design draws its own secrets.
   */
  withSecrets(space: CodeSpace, decoys: number, tag: string): CanaryPool {
    const total = this.all().length;
    if (2 * total > spaceSize(space))
      throw new RangeError(
        `${total} canaries need ${2 * total} distinct secrets (each with a substitute) but design ${tag} holds ${spaceSize(space)}`,
      );
    if (decoys >= spaceSize(space))
      throw new RangeError(
        `${decoys} decoys need a space of more than ${decoys} secrets; design ${tag} holds ${spaceSize(space)}`,
      );
    const codes = new Rng(this.seed, 'codes', tag);
    const taken = new Set<string>();
    const draw = (c: PoolCanary): PoolCanary => ({ id: c.id, code: drawCode(space, codes, taken), substitute: '' });
    const copy = Object.create(CanaryPool.prototype) as CanaryPool;
    const fields = {
      seed: this.seed,
      identities: this.identities,
      messages: this.messages,
      focal: this.focal.map(draw),
      heldOut: this.heldOut.map(draw),
      aux: this.aux.map((cohort) => cohort.map(draw)),
    };
    Object.assign(copy, fields);
    const substitutes = new Rng(this.seed, 'substitutes', tag);
    for (const c of copy.all()) c.substitute = drawCode(space, substitutes, taken);
    for (const c of copy.all())
      c.candidates = sampledCandidates(space, c.code, decoys, new Rng(this.seed, 'candidates', tag, c.id));
    return copy;
  }

  /**
   * Several designs' canaries in one run (`canaries.designs: together`): every canary keeps its
   * id, identity, message and role, and takes its secret, substitute and candidates from the pool
   * of the design `share` names (pools made by `withSecrets` of this pool, or this pool itself).
   */
  together(pools: readonly CanaryPool[], share: (id: string) => number): CanaryPool {
    const pick = (list: (p: CanaryPool) => PoolCanary[]) =>
      list(this).map((c, j) => {
        const from = pools[share(c.id)];
        const mine = from ? list(from)[j] : undefined;
        if (mine?.id !== c.id) throw new RangeError(`canary ${c.id} is not in the pool of its design`);
        return mine;
      });
    const copy = Object.create(CanaryPool.prototype) as CanaryPool;
    Object.assign(copy, {
      seed: this.seed,
      identities: this.identities,
      messages: this.messages,
      specJson: this.specJson,
      focal: pick((p) => p.focal),
      heldOut: pick((p) => p.heldOut),
      aux: this.aux.map((_, k) => pick((p) => p.aux[k] ?? [])),
    });
    return copy;
  }

  all(): PoolCanary[] {
    return [...this.focal, ...this.heldOut, ...this.aux.flat()];
  }

  /** Identity of canary `id` for a task family; every identity key in the pool is distinct. */
  identity(task: Task, id: string): RenderedIdentity {
    const drawn = this.familyIdentities(task).get(id);
    if (!drawn) throw new RangeError(`no canary ${id} in the pool`);
    return { ...drawn, text: task.renderIdentity(drawn.value) };
  }

  /** Identity keys of every pool canary: background rows must never reuse one. */
  identityKeys(task: Task): Set<string> {
    return new Set([...this.familyIdentities(task).values()].map((i) => i.key));
  }

  /** The canary's message for one task value (style): drawn once, repeated at every appearance. */
  message(task: Task, spec: TaskSpec, id: string): unknown {
    // Called at every appearance of every canary: the spec's canonical JSON is made once per spec.
    let specJson = this.specJson.get(spec);
    if (specJson === undefined) this.specJson.set(spec, (specJson = canonicalJson(spec)));
    const key = `${specJson}\u0000${id}`;
    if (!this.messages.has(key)) this.messages.set(key, task.drawMessage(new Rng(this.seed, 'message', specJson, id)));
    return this.messages.get(key);
  }

  private familyIdentities(task: Task): Map<string, { key: string; value: unknown }> {
    let map = this.identities.get(task.name);
    if (!map) {
      map = new Map();
      const rng = new Rng(this.seed, 'identities', task.name);
      const keys = new Set<string>();
      for (const c of this.all()) {
        let drawn = task.drawIdentity(rng);
        for (let tries = 1; keys.has(drawn.key); tries += 1) {
          if (tries > 10_000)
            throw new RangeError(
              `task ${task.name} ran out of distinct identities after ${keys.size} of ${this.all().length} canaries; use fewer canaries`,
            );
          drawn = task.drawIdentity(rng);
        }
        keys.add(drawn.key);
        map.set(c.id, drawn);
      }
      this.identities.set(task.name, map);
    }
    return map;
  }
}
