/**
 * Lab case of `fill_random.wgsl` (synthetic benchmark weights) through `fillRandom()` (src/ops/fill.ts).
 * @module
 */
import { type FillKind, fillRandom } from "../../ops/fill.ts";
import { type CaseInputs, compareAll, int, type KernelCase, num, oneOf } from "../case.ts";
import { EXACT, type Tolerance } from "../compare.ts";
import { BufferSet, readF32, readU32, seal } from "../harness.ts";
import { type FillMode, type FillRef, fillRef } from "../ref/fill.ts";
import { halfValue } from "../ref/half.ts";
import { readBuffer } from "../../gpu/readback.ts";

export interface FillInputs extends CaseInputs, FillRef {}

/**
 * Hashes are exact. bf16 values: the kernel forms them in f32 before rounding, which can move a value that
 * sits on a rounding midpoint to the neighbouring bf16 (one ulp, at most 2^-7 relative).
 */
function tolerance(mode: string): Record<string, Tolerance> {
  return {
    out: mode === "raw" ? EXACT : mode === "f32" ? { atol: 1e-7, rtol: 1e-6 } : { atol: 0, rtol: 2 ** -7 },
  };
}

export const fillCase: KernelCase<FillInputs> = {
  files: ["fill_random.wgsl"],
  summary:
    "counter-hash random words for synthetic weights (packed q values, bf16 scales/biases, f32 vectors)",
  // One 4-bit 2560×9728 projection's packed words.
  defaults: {
    mode: "raw",
    words: 2560 * 9728 / 8,
    word0: 0,
    seed: 11,
    seed2: 12,
    lo: 0.002,
    hi: 0.02,
    mid: 7.5,
  },
  small: { mode: "bias", words: 1031, word0: 77, seed: 3, seed2: 4, lo: 0.01, hi: 0.05, mid: 7.5 },
  keys: {
    mode: "raw (hash words), uniform (bf16 pairs in [lo, hi)), bias (bf16 biases centring q), " +
      "f32 (f32 in [lo, hi))",
    words: "words written",
    word0: "index of the first word in the whole tensor",
    seed: "stream",
    seed2: "scales' stream (bias)",
    lo: "range low",
    hi: "range high",
    mid: "code at the centre, (2^bits − 1)/2 (bias)",
  },
  make: (shape, _rng, env) => ({
    shape,
    act: env.act,
    mode: oneOf(shape, "mode", ["raw", "uniform", "bias", "f32"] as const),
    words: int(shape, "words"),
    word0: int(shape, "word0", 0),
    seed: int(shape, "seed", 0),
    seed2: int(shape, "seed2", 0),
    lo: Math.fround(num(shape, "lo")),
    hi: Math.fround(num(shape, "hi")),
    mid: Math.fround(num(shape, "mid")),
  }),
  async bind(gpu, i) {
    const set = new BufferSet(gpu);
    const out = set.scratch("out", i.words * 4);
    const fill: Record<FillMode, FillKind> = {
      raw: { kind: "raw" },
      uniform: { kind: "uniformBf16", lo: i.lo, hi: i.hi },
      bias: { kind: "biasBf16", scaleSeed: i.seed2, lo: i.lo, hi: i.hi, mid: i.mid },
      f32: { kind: "uniformF32", lo: i.lo, hi: i.hi },
    };
    const ctx = set.context();
    await fillRandom(ctx, { out, words: i.words, word0: i.word0, seed: i.seed, fill: fill[i.mode] });
    return seal(set, ctx, { maxKvLen: 1 }, async () => {
      if (i.mode === "raw") return { out: await readU32(gpu, out, i.words) };
      if (i.mode === "f32") return { out: await readF32(gpu, out, i.words) };
      const h = new Uint16Array(await readBuffer(gpu, out, 0, i.words * 4));
      return { out: Float64Array.from(h, (b) => halfValue(b, "bf16")) };
    });
  },
  check: (got, i) => compareAll(got, { out: fillRef(i) }, tolerance(i.mode)),
  tolerance: (shape) => tolerance(String(shape.mode)),
  cost: (shape) => ({ bytes: Number(shape.words) * 4, flops: 0 }),
};
