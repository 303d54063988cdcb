import { createHash } from 'node:crypto';

/**
 * Seeded pseudo-random streams (xoshiro128**). Every random choice in a plan comes from a named
 * stream derived from the grid seed, so a choice depends only on the inputs named in its stream
 * key: positions keyed by (seed, placement, dose, …) cannot move when an unrelated axis changes.
 */
export class Rng {
  private s0: number;
  private s1: number;
  private s2: number;
  private s3: number;

  /** `key` parts are joined and hashed; equal keys give equal streams. */
  constructor(...key: (string | number)[]) {
    const digest = createHash('sha256').update(key.map(String).join('\u001f')).digest();
    this.s0 = digest.readUInt32LE(0);
    this.s1 = digest.readUInt32LE(4);
    this.s2 = digest.readUInt32LE(8);
    this.s3 = digest.readUInt32LE(12);
    // The all-zero state is a fixed point of xoshiro; sha256 makes it astronomically unlikely.
    if ((this.s0 | this.s1 | this.s2 | this.s3) === 0) this.s0 = 1;
  }

  /** Uniform 32-bit unsigned integer. */
  nextU32(): number {
    const result = Math.imul(rotl(Math.imul(this.s1, 5), 7), 9) >>> 0;
    const t = this.s1 << 9;
    this.s2 ^= this.s0;
    this.s3 ^= this.s1;
    this.s1 ^= this.s2;
    this.s0 ^= this.s3;
    this.s2 ^= t;
    this.s3 = rotl(this.s3, 11);
    return result;
  }

  /** Uniform integer in [0, n), unbiased (rejection sampling). */
  int(n: number): number {
    if (!Number.isInteger(n) || n <= 0 || n > 0x1_0000_0000) throw new RangeError(`Rng.int: bad bound ${n}`);
    const limit = 0x1_0000_0000 - (0x1_0000_0000 % n);
    for (;;) {
      const x = this.nextU32();
      if (x < limit) return x % n;
    }
  }

  /** Uniform float in [0, 1). */
  float(): number {
    return this.nextU32() / 0x1_0000_0000;
  }

  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new RangeError('Rng.pick: empty list');
    return items[this.int(items.length)] as T;
  }

  /** Shuffle in place (Fisher–Yates) and return the array. */
  shuffle<T>(items: T[]): T[] {
    for (let i = items.length - 1; i > 0; i -= 1) {
      const j = this.int(i + 1);
      const tmp = items[i] as T;
      items[i] = items[j] as T;
      items[j] = tmp;
    }
    return items;
  }

  /** `k` distinct items drawn uniformly from `items` (partial Fisher–Yates on a copy), in draw order. */
  sample<T>(items: readonly T[], k: number): T[] {
    if (k > items.length) throw new RangeError(`Rng.sample: ${k} > ${items.length}`);
    const copy = items.slice();
    for (let i = 0; i < k; i += 1) {
      const j = i + this.int(copy.length - i);
      const tmp = copy[i] as T;
      copy[i] = copy[j] as T;
      copy[j] = tmp;
    }
    return copy.slice(0, k);
  }
}

function rotl(x: number, k: number): number {
  return ((x << k) | (x >>> (32 - k))) >>> 0;
}
