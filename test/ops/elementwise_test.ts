/**
 * silu_mul.wgsl through src/ops/elementwise.ts against src/lab/ref/elementwise.ts: the silu gate (SwiGLU)
 * and the gelu_tanh one (Gemma's gelu_pytorch_tanh), gates over ±8 (both tails).
 * Tolerance: act in, f32 out on both paths, |d| ≤ 1e-7 + 2e-6·|ref|.
 */
import { describe, test } from "vitest";
import { siluMulCase } from "../../src/lab/cases/elementwise.ts";
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
      "gelu_tanh gate: R×I = 3×1037, 2×4099; rows from row0 = 3",
      on(path, async (gpu) => {
        await expectCase(gpu, siluMulCase, { R: 3, I: 1037, fn: "gelu_tanh" }, 11);
        await expectCase(gpu, siluMulCase, { R: 2, I: 4099, row0: 3, fn: "gelu_tanh" }, 12);
      }),
    );
  });
}
