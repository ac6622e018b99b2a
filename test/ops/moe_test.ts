/**
 * The mixture-of-experts router (with subgroups and without) and combine through src/ops/moe*.ts against
 * the float64 references
 * (src/lab/ref/moe.ts), on both activation paths: the router (E = 4 .. 512, k up to 16, exact ties, with
 * and without renormalization, row0 > 0, a row past the routed ones that stays untouched); the combine with
 * and without Qwen3-Next's gated shared expert. The expert matmuls are in moe_matmul_test.ts.
 * Tolerances (src/lab/cases/moe.ts), the same on both paths (x, y are f32 everywhere):
 *   route:    ids exact;  weights |d| ≤ 1e-6 + 3e-5·|ref| (f32 exp and division)
 *   combine:  |d| ≤ 2e-6 + 1e-5·|ref|
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { Gpu } from "../../src/gpu/device.ts";
import { moeCombineCase, moeRouteCase } from "../../src/lab/cases/moe.ts";
import { devices, expectCase } from "../util/lab.ts";

const { on } = devices();

for (const path of ["f16", "f32"] as const) {
  describe(`moe, ${path} activations`, () => {
    test(
      "route: E = 13, 7, 4 (k = E), 32, 129, 512 (k = 16); exact ties; renormalized or not; row0 > 0",
      on(path, async (gpu) => {
        for (
          const [n, s] of [
            { R: 3, row0: 1, E: 13, k: 3, renorm: 1 },
            { R: 1, row0: 0, E: 7, k: 2, renorm: 0 },
            { R: 2, row0: 3, E: 4, k: 4, renorm: 1 },
            { R: 2, row0: 1, E: 32, k: 8, renorm: 1 },
            { R: 5, row0: 2, E: 129, k: 8, renorm: 0 },
            { R: 3, row0: 1, E: 512, k: 16, renorm: 1 },
          ].entries()
        ) {
          await expectCase(gpu, moeRouteCase, s, 10 + n);
        }
      }),
    );

    test(
      "combine: with and without the gated shared expert; M = 1, 3, 5; H = 37, 1029; k = 1, 3, 8",
      on(path, async (gpu) => {
        for (
          const [n, s] of [
            { M: 1, row0: 0, k: 1, H: 37 },
            { M: 3, row0: 1, k: 3, H: 37 },
            { M: 5, row0: 2, k: 8, H: 1029 },
          ].entries()
        ) {
          for (const shared of [0, 1]) await expectCase(gpu, moeCombineCase, { ...s, shared }, 50 + n);
        }
      }),
    );
  });
}

describe("moe router without subgroups (fixed-order trees)", () => {
  let gpu: Gpu;
  beforeAll(async () => {
    gpu = await Gpu.create({ subgroups: false });
  });
  afterAll(() => gpu?.destroy());

  test("route: E = 13, 129, 512 (k = 16); exact ties; renormalized or not", async () => {
    expect(gpu.info.subgroups).toBe(false);
    for (
      const [n, s] of [
        { R: 3, row0: 1, E: 13, k: 3, renorm: 1 },
        { R: 5, row0: 2, E: 129, k: 8, renorm: 0 },
        { R: 3, row0: 1, E: 512, k: 16, renorm: 1 },
      ].entries()
    ) {
      await expectCase(gpu, moeRouteCase, s, 20 + n);
    }
    expect(gpu.takeErrors()).toEqual([]);
  });
});
