/**
 * MLX affine quantization (src/loader/quantize.ts); `deno task convert` has its own tests (convert_test.ts).
 *
 * Error bound used throughout, derived from MLX's quantizer (bias = the group's larger-magnitude edge,
 * scale = edge/q0 so that 0.0 is exact): with t = (w − bias)/scale, q = clamp(rint(t), 0, 2^bits − 1).
 * t is never below 0 (the bias is the near edge) and the far edge overshoots 2^bits − 1 by at most one step,
 * so |w − ŵ| ≤ |scale|/2 for every value that is not clipped, and ≤ |scale|·(t − 2^bits + 1) ≤ |scale| for
 * the clipped ones. "|w − ŵ| ≤ |scale|/2" alone is NOT a true statement about MLX's output (about 0.8% of
 * the qwen3 fixture's weights are clipped that way), so the tests assert the split bound above.
 */
import { describe, expect, test } from "vitest";
import {
  AFFINE_BITS,
  AFFINE_GROUP_SIZES,
  dequantizeAffine,
  packAffine,
  quantizeAffine,
  unpackAffine,
} from "../../src/loader/quantize.ts";
import { countMismatches, rintEven } from "../util/quantize.ts";

const fround = Math.fround;

/** Seeded uniform [0, 1) (mulberry32). */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Random non-zero weights; each group gets its own spread and offset so that both scale signs (|min| > |max|
 * and the reverse) and one-signed groups all occur. */
function randomWeights(rows: number, cols: number, groupSize: number, seed: number): Float32Array {
  const r = rng(seed);
  const w = new Float32Array(rows * cols);
  for (let g = 0; g < w.length / groupSize; g++) {
    const spread = 0.01 + 2 * r();
    const offset = [-1, -0.3, 0, 0, 0.3, 1][Math.floor(r() * 6)] * spread;
    for (let j = 0; j < groupSize; j++) {
      const v = fround(offset + (2 * r() - 1) * spread);
      w[g * groupSize + j] = v === 0 ? 1e-3 : v;
    }
  }
  return w;
}

/** Bit-by-bit packer straight from the layout definition: bit b of element i is stream bit i·bits + b,
 * stream bit n is bit n % 32 of word n / 32 (each row starts on a word since cols·bits % 32 == 0). */
function referencePack(q: Uint8Array, bits: number): Uint32Array {
  const out = new Uint32Array((q.length * bits) / 32);
  for (let i = 0; i < q.length; i++) {
    for (let b = 0; b < bits; b++) {
      if ((q[i] >> b) & 1) {
        const n = i * bits + b;
        out[n >>> 5] |= 1 << (n & 31);
      }
    }
  }
  return out;
}

describe("quantizeAffine / dequantizeAffine", () => {
  const cases: [number, number, number][] = [];
  for (const bits of AFFINE_BITS) {
    for (const gs of AFFINE_GROUP_SIZES) for (const rows of [1, 7, 13]) cases.push([bits, gs, rows]);
  }
  let clippedSeen = 0;

  test.each(cases)(
    "%i bits, group %i, %i rows: q survives packing, dequantization is scale·q + bias",
    (bits, gs, rows) => {
      const cols = 3 * gs;
      const w = randomWeights(rows, cols, gs, bits * 1000 + gs * 10 + rows);
      const { weight, scales, biases } = quantizeAffine(w, rows, cols, bits, gs);
      expect(weight.length).toBe((rows * cols * bits) / 32);
      expect(scales.length).toBe((rows * cols) / gs);
      const nBins = (1 << bits) - 1;
      // q recomputed from the returned (float32) scale and bias with MLX's float32 formula.
      const q = new Uint8Array(rows * cols);
      for (let i = 0; i < q.length; i++) {
        const g = Math.floor(i / gs);
        q[i] = Math.min(nBins, Math.max(0, rintEven(fround(fround(w[i] - biases[g]) / scales[g]))));
      }
      expect(countMismatches(unpackAffine(weight, rows, cols, bits), q)).toBe(0);
      expect(countMismatches(weight, referencePack(q, bits))).toBe(0);
      expect(countMismatches(packAffine(q, rows, cols, bits), weight)).toBe(0);
      const deq = dequantizeAffine(weight, scales, biases, rows, cols, bits, gs);
      for (let i = 0; i < q.length; i++) {
        const g = Math.floor(i / gs);
        if (deq[i] !== fround(fround(scales[g] * q[i]) + biases[g])) {
          throw new Error(
            `dequantized value ${i} is not s·q + b`,
          );
        }
      }
    },
  );

  test.each(cases)("%i bits, group %i, %i rows: per-group error bound", (bits, gs, rows) => {
    const cols = 3 * gs;
    const w = randomWeights(rows, cols, gs, 7 + bits * 1000 + gs * 10 + rows);
    const { weight, scales, biases } = quantizeAffine(w, rows, cols, bits, gs);
    const deq = dequantizeAffine(weight, scales, biases, rows, cols, bits, gs);
    const q = unpackAffine(weight, rows, cols, bits);
    const nBins = (1 << bits) - 1;
    for (let i = 0; i < w.length; i++) {
      const g = Math.floor(i / gs);
      const s = Math.abs(scales[g]);
      // Tolerance: float32 rounding of t and of ŵ = fround(fround(s·q) + b), a few ulps of the group's range.
      const tol = 1e-6 * (Math.abs(biases[g]) + nBins * s);
      const t = (w[i] - biases[g]) / scales[g];
      const err = Math.abs(w[i] - deq[i]);
      expect(t).toBeGreaterThanOrEqual(-1e-5);
      expect(t).toBeLessThanOrEqual(nBins + 1 + 1e-5);
      if (t <= nBins + 0.5) {
        if (err > s / 2 + tol) throw new Error(`value ${i}: |w − ŵ| = ${err} > |scale|/2 = ${s / 2}`);
      } else {
        clippedSeen++;
        expect(q[i]).toBe(nBins);
        if (err > s * (t - nBins) + tol || err > s + tol) {
          throw new Error(`clipped value ${i}: error ${err}, scale ${s}`);
        }
      }
    }
  });

  test("the clipped far-edge case really occurs in random data (so the split bound is needed)", () => {
    expect(clippedSeen).toBeGreaterThan(0);
  });

  test("MLX's zero-point snap: bias is the larger-magnitude edge and 0.0 dequantizes to exactly 0", () => {
    const w = new Float32Array(32).fill(0.5);
    w[0] = -1;
    w[1] = 0.98;
    w[2] = 0;
    const { weight, scales, biases } = quantizeAffine(w, 1, 32, 4, 32);
    // (0.98 + 1)/15 = 0.132, q0 = rint(-1/0.132) = -8, so scale = -1/-8 and bias = -1.
    expect(scales[0]).toBe(0.125);
    expect(biases[0]).toBe(-1);
    const q = unpackAffine(weight, 1, 32, 4);
    expect([q[0], q[1], q[2], q[3]]).toEqual([0, 15, 8, 12]); // 0.98 → t = 15.84, clipped to 15
    const deq = dequantizeAffine(weight, scales, biases, 1, 32, 4, 32);
    expect(deq[2]).toBe(0);
    expect(deq[1]).toBe(0.875);
    // |max| ≥ |min|: negative scale, bias = max.
    const p = quantizeAffine(new Float32Array(32).map((_, i) => 0.25 + i / 31), 1, 32, 4, 32);
    expect(p.scales[0]).toBeLessThan(0);
    expect(p.biases[0]).toBe(1.25);
  });

  test("all-zero group: scale is -1e-7 (float32), bias 0, q 0", () => {
    const { weight, scales, biases } = quantizeAffine(new Float32Array(64), 1, 64, 3, 64);
    expect(scales[0]).toBe(-fround(1e-7));
    expect(biases[0]).toBe(0);
    expect([...weight].every((x) => x === 0)).toBe(true);
  });

  test("3-bit values straddle word boundaries as one little-endian stream", () => {
    const q = new Uint8Array(32).map((_, i) => i % 8);
    const packed = packAffine(q, 1, 32, 3);
    // Element 10 (value 2 = 0b010) sits at stream bits 30..32: bit 1 lands in bit 31 of word 0.
    expect(packed[0] >>> 30).toBe(0b10);
    expect(packed[1] & 1).toBe(0);
    expect(countMismatches(unpackAffine(packed, 1, 32, 3), q)).toBe(0);
  });

  test("rejects unsupported bits, group sizes and shapes", () => {
    expect(() => quantizeAffine(new Float32Array(64), 1, 64, 7, 64)).toThrow(/bits 7/);
    expect(() => quantizeAffine(new Float32Array(64), 1, 64, 4, 16)).toThrow(/group size 16/);
    expect(() => quantizeAffine(new Float32Array(96), 1, 96, 4, 64)).toThrow(/multiple of 64/);
  });
});
