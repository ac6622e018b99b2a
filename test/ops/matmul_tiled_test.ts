/**
 * matmul_tiled.wgsl (prefill chunks) through src/ops/matmul.ts against the float64 reference
 * (src/lab/ref/matmul.ts), on both activation paths: every weight format (MLX affine 2/3/4/5/6/8 bits with
 * two group sizes each, f16, bf16) with each epilogue (act; f32 + bias; add + bias); M and N that are not
 * multiples of 64 and span several tiles; 16-bit K not a multiple of the 32-value k-tile; row shards with
 * column offsets; batch invariance (a row's bits do not depend on M or its tile position).
 * x is f32 on both paths; 4-bit weights also run matmul_tiled_x8.wgsl (int8 x, shape key x8 = 1; the
 * engine's default for 4-bit matrices of ≥ 4M weights; also split along K, summed by matmul_splitk.wgsl) against a reference that quantizes x the same way. Tolerances (src/lab/cases/matmul.ts): f32 outputs |d| ≤ 2e-7·√K + 1e-6 +
 * 1e-5·|ref| (f32 accumulation); act outputs on the f16 path |d| ≤ 2e-7·√K + 1.1e-5 + 1e-3·|ref| (plus
 * the f16 rounding of y).
 */
import { describe, expect, test } from "vitest";
import { matmulTiledCase } from "../../src/lab/cases/matmul.ts";
import { setMatmulTuning, usesX8 } from "../../src/ops/matmul.ts";
import { devices, expectBitwise, expectCase } from "../util/lab.ts";
import { EPILOGUES, FORMATS, kFor, matmulInputs, yOf } from "../util/matmul.ts";

const { on } = devices();

for (const path of ["f16", "f32"] as const) {
  describe(`matmul_tiled, ${path} activations`, () => {
    for (const f of FORMATS) {
      // N above one 64-column tile, neither M nor N a multiple of 64 (the sweep below crosses more tiles).
      test(
        `${f.w} (${f.scale} scales): act, f32 + bias, add + bias; M=37 N=133 K=${kFor(f.w)}`,
        on(path, async (gpu) => {
          for (const [s, e] of EPILOGUES.entries()) {
            await expectCase(gpu, matmulTiledCase, { ...f, ...e, M: 37, N: 133, K: kFor(f.w) }, 20 + s);
          }
        }),
      );
    }

    test(
      "M = 1, 5, 64, 129 and N = 1, 64, 191",
      on(path, async (gpu) => {
        for (const [M, N] of [[1, 191], [5, 64], [64, 1], [129, 191]]) {
          await expectCase(gpu, matmulTiledCase, { w: "q4g64", K: 320, M, N, out: "act" }, M + N);
        }
      }),
    );

    test(
      "wide matrices: 128-column tiles at the default threshold (N = 4099) and forced at small N; TM 4",
      on(path, async (gpu) => {
        await expectCase(gpu, matmulTiledCase, { w: "q4g64", K: 64, M: 37, N: 4099, out: "act" }, 1);
        for (const t of [{ wideN: 1 }, { TM: 4 }]) {
          const prev = setMatmulTuning({ tiled: t });
          try {
            for (const s of [{ w: "q3g32", K: 224 }, { w: "bf16", K: 200 }, { w: "q8g128", K: 384 }]) {
              await expectCase(gpu, matmulTiledCase, { ...s, M: 131, N: 133, out: "add", bias: 1 }, 2);
            }
            // Batch invariance holds within each tile shape too.
            const i = matmulInputs(gpu, "tiled", { w: "q4g64", K: 320, M: 137, N: 133 });
            const full = await yOf(gpu, i);
            const parts = await yOf(gpu, i, [{ M: 1, row0: 0 }, { M: 70, row0: 1 }, { M: 66, row0: 71 }]);
            expectBitwise(parts, full, `${JSON.stringify(t)}: M=1,70,66 vs M=137`);
          } finally {
            setMatmulTuning(prev);
          }
        }
      }),
    );

    test(
      "row shards with a bias, column offset, padded ldy and row0 > 0",
      on(path, async (gpu) => {
        for (const out of ["act", "add"]) {
          const s = { w: "q5g32", K: 224, M: 70, N: 131, shards: 2, bias: 1, noff: 5, pad: 3, row0: 2, out };
          await expectCase(gpu, matmulTiledCase, s, 3);
        }
      }),
    );

    test(
      "int8 x (matmul_tiled_x8.wgsl, 4-bit): group sizes 32/64/128, every epilogue, 64×64 and 64×128 tiles crossed, row0, shards",
      on(path, async (gpu) => {
        const shapes: Record<string, number | string>[] = [
          { w: "q4g32", scale: "f16", K: 224, M: 37, N: 133, out: "act", bias: 0 },
          { w: "q4g64", scale: "bf16", K: 2560, M: 130, N: 67, out: "f32", bias: 1 },
          { w: "q4g128", scale: "bf16", K: 384, M: 65, N: 260, out: "add", bias: 1, row0: 3 },
          { w: "q4g64", scale: "f16", K: 320, M: 70, N: 131, out: "act", bias: 1, shards: 2, noff: 5, pad: 3, row0: 2 },
        ];
        // wideN 4096: these small grids take 64-column tiles (BN64, 128 lanes); wideN 1 or x8MinGrid 0:
        // 128-column tiles; kt2: two 32-value sub-tiles per stage of the 64-column ones (K = 224, 2560, 384,
        // 320: odd and even sub-tile counts); splitK: K summed in 2 or 3 parts by matmul_splitk.wgsl, which
        // applies the epilogue (bias, add, act); x64: x quantized per 64 values where K and the groups allow
        // (K = 2560, 384, 320 here; the g32 shape keeps 32), against a reference that does the same; pf false:
        // each 64-column tile fetched right before it is stored (NOPF), with and without KT2, split-K and x64;
        // 128-column tiles with and without KT2 (kt2w) and NOPF (pfw false).
        for (
          const t of [
            { wideN: 4096, kt2: false }, { wideN: 1, kt2: false }, { wideN: 4096, kt2: true }, { wideN: 4096, kt2: true, x8MinGrid: 0 },
            { wideN: 4096, splitK: 2 }, { wideN: 4096, splitK: 3, kt2: false, x8MinGrid: 0 },
            { wideN: 4096, x64: true }, { wideN: 1, x64: true, splitK: 2 },
            { wideN: 4096, pf: false }, { wideN: 1, pf: false, kt2: false }, { wideN: 4096, pf: false, splitK: 3 },
            { wideN: 4096, pf: false, x64: true }, { wideN: 1, kt2w: false, pfw: true }, { wideN: 1, kt2w: true, pfw: true },
            { wideN: 1, kt2w: false, pfw: false },
          ]
        ) {
          const prev = setMatmulTuning({ tiled: t });
          try {
            for (const [k, s] of shapes.entries()) {
              await expectCase(gpu, matmulTiledCase, { ...s, x8: 1 }, 50 + k);
            }
          } finally {
            setMatmulTuning(prev);
          }
        }
      }),
    );

    test(
      "int8 x: every tile shape gives the same bits (64 or 128 columns, one or two sub-tiles per stage)",
      on(path, async (gpu) => {
        for (const s of [{ K: 224, N: 70 }, { K: 320, N: 133 }]) {
          const i = matmulInputs(gpu, "tiled", { w: "q4g32", x8: 1, M: 67, ...s });
          // One sub-tile per stage first: the others must give its bits. 64-column tiles with two sub-tiles,
          // 128-column ones (KT2 and NOPF by default), and the prefetch / sub-tile choices crossed.
          const shapes = [
            { kt2: false }, { kt2: true }, { x8MinGrid: 0 }, { pf: false }, { pf: false, kt2: false, x8MinGrid: 0 },
            { x8MinGrid: 0, kt2w: false, pfw: true }, { x8MinGrid: 0, kt2w: true, pfw: true },
          ];
          const ys: Float64Array[] = [];
          for (const t of shapes) {
            const prev = setMatmulTuning({ tiled: { wideN: 4096, x8MinGrid: 1e9, ...t } });
            try {
              ys.push(await yOf(gpu, i));
            } finally {
              setMatmulTuning(prev);
            }
          }
          for (let k = 1; k < shapes.length; k++) {
            expectBitwise(ys[k], ys[0], `${JSON.stringify(shapes[k])} vs one sub-tile, ${JSON.stringify(s)}`);
          }
        }
      }),
    );

    test(
      "int8 x only where the device has dot4I8Packed and one subgroup size (else the f32-x kernels)",
      on(path, (gpu) => {
        const w = { format: { kind: "q" as const, bits: 4, groupSize: 64, scaleF16: false }, K: 4096, N: 4096 };
        for (const mode of ["vec", "tiled"] as const) {
          expect(usesX8(gpu.info, w, mode), `${mode} on this device`).toBe(gpu.info.int8Dot && gpu.info.subgroups);
          expect(usesX8({ ...gpu.info, int8Dot: false }, w, mode), `${mode} without dot4I8Packed`).toBe(false);
          expect(usesX8({ ...gpu.info, subgroupMaxSize: 2 * gpu.info.subgroupMinSize }, w, mode), `${mode}, varying subgroups`).toBe(false);
        }
        return Promise.resolve();
      }),
    );

    test(
      "batch invariance: each row's bits are the same whatever M and tile position",
      on(path, async (gpu) => {
        const cases: Record<string, number | string>[] = [
          { w: "q4g64", K: 320, x8: 0 }, { w: "q4g64", K: 320, x8: 1 }, { w: "q4g64", K: 320, x8: 1, N: 4100 },
          { w: "q4g64", K: 320, x8: 1, splitk: 2 }, { w: "q4g64", K: 320, x8: 1, x64: 1 }, { w: "q4g64", K: 320, x8: 1, x64: 1, N: 4100 },
          { w: "q6g32", K: 224, x8: 0 }, { w: "bf16", K: 200, x8: 0 },
        ];
        for (const s of cases) {
          const i = matmulInputs(gpu, "tiled", { N: 70, ...s, M: 137 });
          const full = await yOf(gpu, i);
          const a = await yOf(gpu, i, [{ M: 1, row0: 0 }, { M: 63, row0: 1 }, { M: 73, row0: 64 }]);
          const b = await yOf(gpu, i, [{ M: 5, row0: 0 }, { M: 128, row0: 5 }, { M: 4, row0: 133 }]);
          expectBitwise(a, full, `${JSON.stringify(s)}: M=1,63,73 vs M=137`);
          expectBitwise(b, full, `${JSON.stringify(s)}: M=5,128,4 vs M=137`);
        }
      }),
    );
  });
}
