/**
 * sigmoid_gate.wgsl through src/ops/gate.ts against src/lab/ref/gate.ts.
 * Tolerance: act gate, f32 y on both paths, |d| ≤ 1e-7 + 2e-6·|ref|.
 */
import { describe, test } from "vitest";
import { sigmoidGateCase } from "../../src/lab/cases/gate.ts";
import { devices, expectCase } from "../util/lab.ts";

const { on } = devices();

for (const path of ["f16", "f32"] as const) {
  describe(`sigmoid gate, ${path} activations`, () => {
    test(
      "R×W = 1×1, 3×517, 2×4099; rows from row0 = 3 (earlier rows left alone)",
      on(path, async (gpu) => {
        for (const [k, [R, W]] of [[1, 1], [3, 517], [2, 4099]].entries()) {
          await expectCase(gpu, sigmoidGateCase, { R, W }, k);
        }
        await expectCase(gpu, sigmoidGateCase, { R: 2, W: 515, row0: 3 }, 9);
      }),
    );
  });
}
