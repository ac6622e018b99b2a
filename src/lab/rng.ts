/**
 * Seeded random inputs for the kernel lab: every case draws from one of these so a failure replays from
 * its seed. Values are never exactly zero (a zero hides a missing multiply or a skipped element).
 * @module
 */

/** Seeded uniform [0, 1) generator (mulberry32): small, fast, and identical in Deno and browsers. */
export class Rng {
  #a: number;
  constructor(seed: number) {
    this.#a = (seed >>> 0) ^ 0x9e3779b9;
  }

  /** Uniform in [0, 1). */
  next(): number {
    this.#a = (this.#a + 0x6d2b79f5) >>> 0;
    let t = this.#a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** Uniform u32. */
  u32(): number {
    return Math.floor(this.next() * 4294967296) >>> 0;
  }

  /** Integer in [lo, hi). */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo));
  }

  /** Uniform in (−a, a), never 0: magnitudes below a·1e-3 are pushed out to a·1e-3. */
  signed(a = 1): number {
    const v = (2 * this.next() - 1) * a;
    const floor = a * 1e-3;
    return Math.abs(v) < floor ? (v < 0 ? -floor : floor) : v;
  }

  /** Uniform in [lo, hi), for positive ranges (scales, weights near 1). */
  range(lo: number, hi: number): number {
    return lo + (hi - lo) * this.next();
  }

  /** n values from `signed(a)`. */
  signedArray(n: number, a = 1): Float64Array {
    const out = new Float64Array(n);
    for (let i = 0; i < n; i++) out[i] = this.signed(a);
    return out;
  }

  /** n random u32 words (random packed quantized values). */
  words(n: number): Uint32Array {
    const out = new Uint32Array(n);
    for (let i = 0; i < n; i++) out[i] = this.u32();
    return out;
  }

  /** A random permutation of 0 .. n−1 (Fisher–Yates). */
  permutation(n: number): number[] {
    const p = Array.from({ length: n }, (_, i) => i);
    for (let i = n - 1; i > 0; i--) {
      const j = this.int(0, i + 1);
      [p[i], p[j]] = [p[j], p[i]];
    }
    return p;
  }
}
