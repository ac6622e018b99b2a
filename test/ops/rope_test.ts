/**
 * rope.wgsl through src/ops/rope.ts against src/lab/ref/rope.ts: Qwen3 q/k norm, partial rotary (rot < hd),
 * a non-trivial mscale, GQA, and K/V written through a shuffled page table (pages neither contiguous nor
 * increasing, page size 5 so positions cross pages). The whole KV pool is compared: a write to the wrong
 * page or token fails. Positions reach 5000 (large angles: the range reduction must hold up). The 8-bit
 * cache (`kv8`, src/lab/ref/kv8.ts): K/V quantized per block as they are written, hd 40 (blocks of 8) and
 * 128 (blocks of 32); the rest of the pool (q8 codes, scales) must come back unchanged.
 * Tolerance: f32 |d| ≤ 1e-6 + 2e-6·|ref|; f16 |d| ≤ 1e-5 + 1e-3·|ref|. q8 K/V (both paths quantize f32
 * values): the reference's codes, either code only for a value within the f32 tolerance above of a
 * rounding boundary, and values within that tolerance on the block max plus a few f32 ulp (|d| ≤ 1e-6 +
 * 2.5e-6·amax + 2^-23·|ref|; quantizeWritten, kv8Tolerance in src/lab/cases/paged.ts); q as above.
 */
import { describe, test } from "vitest";
import { ropeCase } from "../../src/lab/cases/rope.ts";
import { devices, expectCase } from "../util/lab.ts";

const { on } = devices();

// The first two shapes also run with the 8-bit cache (seeds 5 and 6).
const QKNORM_40 = {
  R: 7,
  nq: 6,
  nkv: 2,
  hd: 40,
  rot: 24,
  ps: 5,
  qknorm: 1,
  mscale: 1.13,
  slots: 3,
  maxpos: 97,
};
const LLAMA_128 = {
  R: 9,
  nq: 8,
  nkv: 2,
  hd: 128,
  rot: 128,
  ps: 16,
  qknorm: 0,
  mscale: 1,
  theta: 500000,
  slots: 2,
  maxpos: 5001,
};

for (const path of ["f16", "f32"] as const) {
  describe(`rope, ${path} activations`, () => {
    for (const kv8 of [0, 1]) {
      const q8 = kv8 ? "q8 cache: " : "";
      test(
        `${q8}q/k norm, partial rotary 24 of 40${kv8 ? " (blocks of 8)" : ""}, mscale 1.13, page size 5`,
        on(path, async (gpu) => {
          await expectCase(gpu, ropeCase, { ...QKNORM_40, kv8 }, kv8 ? 5 : 1);
        }),
      );
      test(
        `${q8}full rotary without norm (llama), hd 128${
          kv8 ? " (blocks of 32)" : ""
        }, GQA 4, positions up to 5000`,
        on(path, async (gpu) => {
          await expectCase(gpu, ropeCase, { ...LLAMA_128, kv8 }, kv8 ? 6 : 2);
        }),
      );
    }
    test(
      "hd 256 (more dims than lanes), rot 64, one kv head, mscale 0.87",
      on(path, async (gpu) => {
        await expectCase(gpu, ropeCase, {
          R: 3,
          nq: 3,
          nkv: 1,
          hd: 256,
          rot: 64,
          ps: 7,
          qknorm: 1,
          mscale: 0.87,
          theta: 10000,
          slots: 2,
          maxpos: 300,
        }, 3);
      }),
    );
    test(
      "one row at position 0",
      on(path, async (gpu) => {
        await expectCase(gpu, ropeCase, {
          R: 1,
          nq: 2,
          nkv: 1,
          hd: 64,
          rot: 64,
          ps: 16,
          qknorm: 1,
          mscale: 1.2,
          slots: 1,
          maxpos: 1,
        }, 4);
      }),
    );
  });
}
