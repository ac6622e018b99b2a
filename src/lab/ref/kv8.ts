/**
 * The 8-bit KV cache format ("q8"), written once for the kernels' references:
 *  - codes: the same element layout as an act cache, (pages, 2, nkv, ps, hd), one signed byte per
 *    element, four per u32 (element i in byte i % 4, the order of WGSL's pack4xI8 / unpack4xI8);
 *  - scales: f32 (pages, 2, nkv, ps, hd / QB), one per block of QB consecutive elements of a head row, so
 *    element e's scale is scales[e / QB]. QB = 32 (16 or 8 for head dims that 32 does not divide).
 * Quantizer (symmetric, per block, in f32 as the kernels compute it):
 *   amax = max |x|,  s = amax / 127,  code = clamp(round_half_even(x · (127 / amax)), −127, 127),
 *   value = code · s   (a block of zeros gets s = 0 and codes 0).
 * @module
 */
import { ShapeError } from "../../errors.ts";
export { kv8Block } from "../../ops/kv8.ts";

function roundHalfEven(x: number): number {
  const r = Math.round(x);
  return Math.abs(x % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

export interface Kv8 {
  /** One code per element. */
  codes: Int8Array;
  /** One f32 scale per block. */
  scales: Float32Array;
  /** code · scale per element (what attention reads). */
  values: Float64Array;
}

/** Quantizes `x` (length a multiple of `qb`) block by block. */
export function quantizeKv8(x: ArrayLike<number>, qb: number): Kv8 {
  const n = x.length;
  if (n % qb !== 0) throw new ShapeError(`quantizeKv8: ${n} values are not whole blocks of ${qb}`);
  const codes = new Int8Array(n);
  const scales = new Float32Array(n / qb);
  const values = new Float64Array(n);
  for (let b = 0; b < n / qb; b++) {
    let amax = 0;
    for (let i = b * qb; i < (b + 1) * qb; i++) amax = Math.max(amax, Math.abs(Math.fround(x[i])));
    const s = Math.fround(amax / 127);
    const inv = amax > 0 ? Math.fround(127 / amax) : 0;
    scales[b] = s;
    for (let i = b * qb; i < (b + 1) * qb; i++) {
      const c = Math.min(127, Math.max(-127, roundHalfEven(Math.fround(Math.fround(x[i]) * inv))));
      codes[i] = c;
      values[i] = Math.fround(c * s);
    }
  }
  return { codes, scales, values };
}

/** Values of codes + scales read back from the GPU (the codes as raw bytes). */
export function dequantizeKv8(codes: Uint8Array, scales: Float32Array, n: number, qb: number): Float64Array {
  const i8 = new Int8Array(codes.buffer, codes.byteOffset, n);
  return Float64Array.from({ length: n }, (_, i) => Math.fround(i8[i] * scales[Math.floor(i / qb)]));
}
