/**
 * matmul_sgmat.wgsl (prefill matmuls on matrix units: Dawn's subgroup matrices, f16 × f16 → f32) through
 * src/ops/matmul.ts against the float64 reference with x and the dequantized weights rounded to f16
 * (src/lab/ref/matmul.ts `f16Operands`); tolerance in src/lab/cases/matmul.ts (|d| ≤ 1e-5·√K + 1e-4 +
 * 2e-3·|ref| on f32 outputs). Shapes: M and N off the 128-tile (edges dropped), several K chunks, both scale
 * dtypes, group sizes 32/64/128, 4- and 8-bit, every epilogue, bias, row0 and column offsets, row shards,
 * weights dequantized in blocks of rows or inside the GEMM, K whole or split (partials summed by
 * matmul_splitk.wgsl); batch invariance, also across the two dequantizations.
 * It runs where Dawn loads and offers f16 16×16×16 matrices with subgroups of 32 (the H200 with dawn.node:
 * `FLINT_DAWN_NODE=... deno task test test/ops/matmul_matrix_test.ts`); elsewhere it is skipped, and
 * test/engine/dawn_test.ts checks in CI that Tint compiles the kernel.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { Gpu } from "../../src/gpu/device.ts";
import { matmulSgmatCase } from "../../src/lab/cases/matmul.ts";
import { usesMatrixUnits } from "../../src/ops/matmul.ts";
import { expectBitwise, expectCase, matrixGpu, NO_MATRIX_UNITS } from "../util/lab.ts";
import { matmulInputs, yOf } from "../util/matmul.ts";

let gpu: Gpu | null = null;
beforeAll(async () => {
  const q4 = { kind: "q", bits: 4, groupSize: 64, scaleF16: false } as const;
  gpu = await matrixGpu((g) =>
    usesMatrixUnits(g.withProfile({ matmul: { tiled: { matrixUnits: true } } }), { format: q4, K: 64 })
  );
});
afterAll(() => gpu?.destroy());

const on = (fn: (g: Gpu) => Promise<void>) => async (ctx: { skip: (note?: string) => void }) => {
  if (!gpu) return ctx.skip(NO_MATRIX_UNITS);
  await fn(gpu.withProfile({ matmul: { tiled: { matrixUnits: true } } }));
};

describe("matmul_sgmat (matrix units)", () => {
  test(
    "4/8-bit, scales f16 and bf16, groups 32/64/128, act / f32 / add, bias; M, N off the tile; row0, noff, " +
      "shards; weights dequantized in blocks of rows; K split in 1, 2 or 3 partials",
    on(async (g) => {
      const shapes: Record<string, string | number>[] = [
        { w: "q4g64", scale: "bf16", out: "act", M: 37, N: 133, K: 320 },
        { w: "q4g32", scale: "f16", out: "f32", M: 130, N: 257, K: 96, splitk: 3 },
        { w: "q4g128", scale: "bf16", out: "add", M: 200, N: 129, K: 512, row0: 3, noff: 5, pad: 2 },
        { w: "q4g64", scale: "f16", out: "act", M: 129, N: 300, K: 2560, shards: 3, splitk: 1 },
        { w: "q8g64", scale: "bf16", out: "f32", M: 70, N: 200, K: 192, bias: 1 },
        { w: "q8g32", scale: "f16", out: "add", M: 131, N: 333, K: 160, mxblock: 128, noff: 3, pad: 1 },
        { w: "q4g32", scale: "bf16", out: "act", M: 64, N: 390, K: 96, mxblock: 256, bias: 1, shards: 2 },
      ];
      for (const dequant of ["pass", "fused"]) {
        for (const [n, s] of shapes.entries()) {
          const r = await expectCase(g, matmulSgmatCase, { ...s, dequant }, 70 + n);
          expect(r.length).toBeGreaterThan(0);
        }
      }
      expect(g.takeErrors()).toEqual([]);
    }),
  );

  test(
    "batch invariance: a row's bits are the same in M = 300 as in blocks of 1 + 129 + 170",
    on(async (g) => {
      const i = matmulInputs(g, "tiled", { w: "q4g64", K: 256, M: 300, N: 161, mx: 1, x8: 0 });
      const full = await yOf(g, i);
      const parts = await yOf(g, i, [{ M: 1, row0: 0 }, { M: 129, row0: 1 }, { M: 170, row0: 130 }]);
      expectBitwise(parts, full, "M=1,129,170 vs M=300");
      // Short steps dequantize inside the GEMM, long ones in a pass: the same halves, the same bits.
      const passed = await yOf(g.withProfile({ matmul: { tiled: { matrixFusedDequantMaxRows: 0 } } }), i);
      expectBitwise(passed, full, "dequantized in a pass vs inside the GEMM");
    }),
  );
});
