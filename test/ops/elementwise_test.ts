/**
 * silu_mul.wgsl and add.wgsl through src/ops/elementwise.ts against src/lab/ref/elementwise.ts.
 * Tolerances: silu_mul (act in, f32 out on both paths) |d| ≤ 1e-7 + 2e-6·|ref|; add |d| ≤ 2^-23·|ref|
 * (one f32 rounding).
 */
import { describe, test } from "vitest";
import { addCase, siluMulCase } from "../../src/lab/cases/elementwise.ts";
import { devices, expectCase } from "../util/lab.ts";

const { on } = devices();

for (const path of ["f16", "f32"] as const) {
  describe(`element-wise, ${path} activations`, () => {
    test(
      "silu_mul: R×I = 1×1, 3×1037, 2×4099; rows from row0 = 3 (earlier rows left alone)",
      on(path, async (gpu) => {
        for (const [k, [R, I]] of [[1, 1], [3, 1037], [2, 4099]].entries()) {
          await expectCase(gpu, siluMulCase, { R, I }, k);
        }
        await expectCase(gpu, siluMulCase, { R: 2, I: 515, row0: 3 }, 9);
      }),
    );
    test(
      "add: n = 1, 255, 1031, 70001",
      on(path, async (gpu) => {
        for (const [k, n] of [1, 255, 1031, 70001].entries()) await expectCase(gpu, addCase, { n }, k);
      }),
    );
  });
}
