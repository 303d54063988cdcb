import { createHash } from 'node:crypto';

/**
 * The one seeded generator (xoshiro128**), reproducible bit for bit on any platform and Node
 * version (Math.random cannot be seeded). Two ways to seed it, each kept because outputs depend on
 * it: `new Rng(...key)` hashes a stream key (planning: every random choice comes from a named
 * stream derived from the grid seed, so positions keyed by (seed, placement, dose, …) cannot move
 * when an unrelated axis changes), and `Rng.fromSeed(n)` spreads one 32-bit seed with splitmix32
 * (report bootstraps, seeded by `derivedSeed`).
 */
export class Rng {
  private s0 = 0;
  private s1 = 0;
  private s2 = 0;
  private s3 = 0;

  /** `key` parts are joined and hashed; equal keys give equal streams. */
  constructor(...key: (string | number)[]) {
    const digest = createHash('sha256').update(key.map(String).join('\u001f')).digest();
    this.setState(digest.readUInt32LE(0), digest.readUInt32LE(4), digest.readUInt32LE(8), digest.readUInt32LE(12));
  }

  /** A stream from one 32-bit seed, spread over the four state words by splitmix32. */
  static fromSeed(seed: number): Rng {
    let x = seed >>> 0;
    const next = (): number => {
      x = (x + 0x9e3779b9) >>> 0;
      let z = x;
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
      return (z ^ (z >>> 16)) >>> 0;
    };
    const rng = new Rng();
    rng.setState(next(), next(), next(), next());
    return rng;
  }

  private setState(s0: number, s1: number, s2: number, s3: number): void {
    this.s0 = s0 >>> 0;
    this.s1 = s1 >>> 0;
    this.s2 = s2 >>> 0;
    this.s3 = s3 >>> 0;
    // The all-zero state is a fixed point of xoshiro; sha256 and splitmix32 make it astronomically unlikely.
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

  /**
   * Integer in [0, n) by scaling one draw (no rejection: one draw per call, modulo bias below 2^-20
   * for n ≤ 4096). The bootstrap's resampling index; kept apart from `int` so report intervals stay
   * as they were.
   */
  scaledInt(n: number): number {
    return Math.floor((this.nextU32() / 4294967296) * n);
  }

  /**
   * `count` draws of `scaledInt(n)` into `out[0 .. count)`: the same numbers as that many calls,
   * in order, with the generator's state in local variables for the loop (the bootstrap's inner
   * loop draws hundreds of millions of indices per report).
   */
  scaledInts(out: Int32Array, count: number, n: number): void {
    let s0 = this.s0;
    let s1 = this.s1;
    let s2 = this.s2;
    let s3 = this.s3;
    for (let i = 0; i < count; i += 1) {
      const x = Math.imul(s1, 5);
      const r = Math.imul((x << 7) | (x >>> 25), 9) >>> 0;
      const t = s1 << 9;
      s2 ^= s0;
      s3 ^= s1;
      s1 ^= s2;
      s0 ^= s3;
      s2 ^= t;
      s3 = (s3 << 11) | (s3 >>> 21);
      out[i] = Math.floor((r / 4294967296) * n);
    }
    this.s0 = s0 >>> 0;
    this.s1 = s1 >>> 0;
    this.s2 = s2 >>> 0;
    this.s3 = s3 >>> 0;
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

/**
 * A 32-bit seed derived from a seed and a stable label (e.g. a group key), so each interval depends
 * only on its own data and the seed, not on how many groups came before it.
 */
export function derivedSeed(seed: number, label: string): number {
  const digest = createHash('sha256').update(`${seed}\u0000${label}`).digest();
  return digest.readUInt32LE(0);
}
