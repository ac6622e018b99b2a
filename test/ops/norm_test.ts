/**
 * rms_norm.wgsl through src/ops/norm.ts against src/lab/ref/norm.ts, with and without the row gather,
 * rows of very different scale, H from 1 to above the 256-lane workgroup, a first row > 0; `add` (y += the
 * norm) after other rows and over gathered rows.
 * Tolerance (y is f32 on both paths: it feeds a matmul): |d| ≤ 1e-6 + 2e-6·|ref|; with `add` plus
 * 2e-6·|norm term| (y0 may cancel the term whose relative error that is).
 */
import { describe, test } from "vitest";
import { rmsNormCase } from "../../src/lab/cases/norm.ts";
import { devices, expectCase } from "../util/lab.ts";

const { on } = devices();

for (const path of ["f16", "f32"] as const) {
  describe(`rms_norm, ${path} activations`, () => {
    test(
      "plain rows: H = 1, 63, 321, 1031, 2563",
      on(path, async (gpu) => {
        for (const [k, H] of [1, 63, 321, 1031, 2563].entries()) {
          await expectCase(gpu, rmsNormCase, {
            H,
            R: 1 + 2 * k,
            gather: 0,
            X: 1 + 2 * k,
            eps: k % 2 ? 1e-6 : 1e-5,
          }, k);
        }
      }),
    );
    test(
      "gather: rows picked (with repeats) from a larger x",
      on(path, async (gpu) => {
        for (const [k, H] of [321, 1031].entries()) {
          await expectCase(gpu, rmsNormCase, { H, R: 7, gather: 1, X: 13, eps: 1e-6 }, 10 + k);
        }
      }),
    );
    test(
      "row0 > 0: only a step's prefill rows, earlier rows left alone",
      on(path, async (gpu) => {
        await expectCase(gpu, rmsNormCase, { H: 1031, R: 5, gather: 0, X: 9, row0: 4, eps: 1e-6 }, 12);
      }),
    );
    test(
      "add: y += the norm, rows from row0 = 4 (earlier rows left alone); over gathered rows",
      on(path, async (gpu) => {
        await expectCase(
          gpu,
          rmsNormCase,
          { H: 1031, R: 5, gather: 0, X: 9, row0: 4, eps: 1e-6, add: 1 },
          13,
        );
        await expectCase(gpu, rmsNormCase, { H: 321, R: 7, gather: 1, X: 13, eps: 1e-6, add: 1 }, 14);
      }),
    );
  });
}
