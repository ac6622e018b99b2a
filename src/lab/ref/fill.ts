/**
 * Float64 reference of fill_random.wgsl: word w of the tensor is a pure function of (seed, w).
 *   RAW      hash(seed, w)                       UNIFORM  two bf16 of lo + (hi − lo)·u_e, e = 2w, 2w + 1
 *   BIAS     two bf16 of −(mid + u_e − ½)·s_e, s_e the bf16 scale of stream seed2
 *   VEC_F32  f32 lo + (hi − lo)·u_w
 * hash(seed, e) = pcg(e ^ pcg(seed)), u = ⌊hash / 2^8⌋ / 2^24.
 * @module
 */
import { roundHalf } from "./half.ts";
import { pcg } from "./sample.ts";

export type FillMode = "raw" | "uniform" | "bias" | "f32";

export interface FillRef {
  mode: FillMode;
  words: number;
  word0: number;
  seed: number;
  seed2: number;
  lo: number;
  hi: number;
  mid: number;
}

export function fillHash(seed: number, e: number): number {
  return pcg((e ^ pcg(seed >>> 0)) >>> 0);
}

function unit(seed: number, e: number): number {
  return (fillHash(seed, e) >>> 8) / 16777216;
}

/**
 * The tensor's values: u32 words for RAW, the two bf16 values (rounded from float64) per word for
 * UNIFORM/BIAS, f32 for VEC_F32.
 */
export function fillRef(a: FillRef): Float64Array {
  if (a.mode === "raw" || a.mode === "f32") {
    return Float64Array.from(
      { length: a.words },
      (_, w) =>
        a.mode === "raw" ? fillHash(a.seed, a.word0 + w) : a.lo + (a.hi - a.lo) * unit(a.seed, a.word0 + w),
    );
  }
  const out = new Float64Array(2 * a.words);
  for (let i = 0; i < out.length; i++) {
    const e = 2 * a.word0 + i;
    if (a.mode === "uniform") out[i] = roundHalf(a.lo + (a.hi - a.lo) * unit(a.seed, e), "bf16");
    else {
      const s = roundHalf(a.lo + (a.hi - a.lo) * unit(a.seed2, e), "bf16");
      out[i] = roundHalf(-(a.mid + unit(a.seed, e) - 0.5) * s, "bf16");
    }
  }
  return out;
}
