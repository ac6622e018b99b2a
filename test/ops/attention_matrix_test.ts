/**
 * attention_prefill_sgmat.wgsl (prefill attention on matrix units: Dawn's subgroup matrices, f16 × f16 →
 * f32) through src/ops/attention.ts against the float64 reference (src/lab/ref/attention.ts), pages
 * shuffled: GQA 1, 2, 3, 4 and 8 (64, 32 and 16 rows of a head per workgroup), segments off the 16-row slab
 * and the 64-key tile, at position 0 and deep, after other step rows (row0), page sizes 16, 7 and 32, heads
 * at different scales, the 8-bit cache (K and V rounded to f16 as they are staged), sliding windows, and the
 * output rescaled through workgroup memory on every new max of a row (margin 0) as well as at the profile's
 * margin. Tolerance: src/lab/cases/attention.ts (f16: |d| ≤ 5e-4 + 2e-3·|ref| plus the f16 P·V bound).
 * It runs where Dawn loads and offers f16 16×16×16 matrices with subgroups of 32 (the H200 with dawn.node:
 * `FLINT_DAWN_NODE=... deno task test test/ops/attention_matrix_test.ts`); elsewhere it is skipped, and
 * test/engine/dawn_test.ts checks in CI that Tint compiles every variant.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { Gpu } from "../../src/gpu/device.ts";
import { attentionPrefillMatrixCase } from "../../src/lab/cases/attention_prefill.ts";
import { usesMatrixAttention } from "../../src/ops/attention_matrix.ts";
import { expectCase, matrixGpu, NO_MATRIX_UNITS } from "../util/lab.ts";

let gpu: Gpu | null = null;
beforeAll(async () => {
  gpu = await matrixGpu((g) =>
    usesMatrixAttention(g.withProfile({ prefillAttention: { matrixUnits: true } }), { hd: 128 })
  );
});
afterAll(() => gpu?.destroy());

const on = (fn: (g: Gpu) => Promise<void>) => async (ctx: { skip: (note?: string) => void }) => {
  if (!gpu) return ctx.skip(NO_MATRIX_UNITS);
  await fn(gpu);
};

const SHAPES: Record<string, number>[] = [
  { S: 45, p0: 37, nq: 6, nkv: 2, ps: 16, row0: 2 },
  { S: 130, p0: 0, nq: 32, nkv: 8, ps: 16 },
  { S: 77, p0: 1000, nq: 16, nkv: 8, ps: 32, qspread: 1 },
  { S: 200, p0: 300, nq: 8, nkv: 8, ps: 7, window: 100 },
  { S: 100, p0: 500, nq: 32, nkv: 4, ps: 16, kv8: 1 },
  { S: 64, p0: 64, nq: 8, nkv: 2, ps: 16, row0: 3, kv8: 1, window: 33 },
  { S: 1, p0: 900, nq: 4, nkv: 1, ps: 16 },
  { S: 300, p0: 1700, nq: 12, nkv: 4, ps: 16, qspread: 1 },
];

describe("attention_prefill_sgmat (matrix units)", () => {
  test(
    "GQA 1–8, segments off the slab and the tile, deep and at 0, row0, pages 7/16/32, head scales, q8 " +
      "cache, windows; rescaled on every new max and at the profile's margin",
    on(async (g) => {
      for (const rescale of [1, 0]) {
        for (const [n, s] of SHAPES.entries()) {
          const r = await expectCase(g, attentionPrefillMatrixCase, { ...s, rescale }, 40 + n);
          expect(r.length).toBeGreaterThan(0);
        }
      }
      expect(g.takeErrors()).toEqual([]);
    }),
  );
});
