import { createHash } from 'node:crypto';

/**
 * A small seeded generator (xoshiro128**, seeded through splitmix32) so bootstrap intervals are
 * reproducible bit for bit from the report seed, on any platform and Node version
 * (Math.random cannot be seeded).
 */
export class SeededRandom {
  private s0: number;
  private s1: number;
  private s2: number;
  private s3: number;

  constructor(seed: number) {
    let x = seed >>> 0;
    const next = (): number => {
      // splitmix32: spreads one 32-bit seed over the four state words (never all zero).
      x = (x + 0x9e3779b9) >>> 0;
      let z = x;
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
      return (z ^ (z >>> 16)) >>> 0;
    };
    this.s0 = next();
    this.s1 = next();
    this.s2 = next();
    this.s3 = next();
  }

  /** Uniform 32-bit unsigned integer. */
  nextUint32(): number {
    const result = Math.imul(rotl(Math.imul(this.s1, 5) >>> 0, 7), 9) >>> 0;
    const t = (this.s1 << 9) >>> 0;
    this.s2 = (this.s2 ^ this.s0) >>> 0;
    this.s3 = (this.s3 ^ this.s1) >>> 0;
    this.s1 = (this.s1 ^ this.s2) >>> 0;
    this.s0 = (this.s0 ^ this.s3) >>> 0;
    this.s2 = (this.s2 ^ t) >>> 0;
    this.s3 = rotl(this.s3, 11);
    return result;
  }

  /** Uniform integer in [0, n); n ≤ 2^32. The modulo bias is below 2^-20 for n ≤ 4096. */
  nextInt(n: number): number {
    return Math.floor((this.nextUint32() / 4294967296) * n);
  }
}

function rotl(x: number, k: number): number {
  return ((x << k) | (x >>> (32 - k))) >>> 0;
}

/**
 * A 32-bit seed derived from the report seed and a stable label (e.g. a group key), so each
 * interval depends only on its own data and the seed, not on how many groups came before it.
 */
export function derivedSeed(seed: number, label: string): number {
  const digest = createHash('sha256').update(`${seed}\u0000${label}`).digest();
  return digest.readUInt32LE(0);
}
