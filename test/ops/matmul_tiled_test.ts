/**
 * matmul_tiled.wgsl (prefill chunks) through src/ops/matmul.ts against the float64 reference
 * (src/lab/ref/matmul.ts), on both activation paths: every weight format (MLX affine 2/3/4/5/6/8 bits with
 * two group sizes each, f16, bf16) with each epilogue (act; f32 + bias; add + bias); M and N that are not
 * multiples of 64 and span several tiles; 16-bit K not a multiple of the 32-value k-tile; row shards with
 * column offsets; batch invariance (a row's bits do not depend on M or its tile position).
 * x is f32 on both paths; 4-bit weights also run matmul_tiled_x8.wgsl (int8 x, shape key x8 = 1; the
 * engine's default for 4-bit matrices of ≥ 4M weights; also split along K, summed by matmul_splitk.wgsl)
 * against a reference that quantizes x the same way. Tolerances (src/lab/cases/matmul.ts): f32 outputs
 * |d| ≤ 2e-7·√K + 1e-6 +
 * 1e-5·|ref| (f32 accumulation); act outputs on the f16 path |d| ≤ 2e-7·√K + 1.1e-5 + 1e-3·|ref| (plus
 * the f16 rounding of y).
 */
import { describe, expect, test } from "vitest";
import { matmulTiledCase } from "../../src/lab/cases/matmul.ts";
import { usesInt8X } from "../../src/ops/matmul.ts";
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
      "wide matrices: 128-column tiles at the default threshold (N = 4099) and forced at small N",
      on(path, async (gpu) => {
        await expectCase(gpu, matmulTiledCase, { w: "q4g64", K: 64, M: 37, N: 4099, out: "act" }, 1);
        const g = gpu.withProfile({ matmul: { tiled: { wideN: 1 } } });
        for (const s of [{ w: "q3g32", K: 224 }, { w: "bf16", K: 200 }, { w: "q8g128", K: 384 }]) {
          await expectCase(g, matmulTiledCase, { ...s, M: 131, N: 133, out: "add", bias: 1 }, 2);
        }
        // Batch invariance holds within the wide tiles too.
        const i = matmulInputs(g, "tiled", { w: "q4g64", K: 320, M: 137, N: 133 });
        const full = await yOf(g, i);
        const parts = await yOf(g, i, [{ M: 1, row0: 0 }, { M: 70, row0: 1 }, { M: 66, row0: 71 }]);
        expectBitwise(parts, full, `wideN 1: M=1,70,66 vs M=137`);
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
      "int8 x (matmul_tiled_x8.wgsl, 4-bit): group sizes 32/64/128, every epilogue, " +
        "64×64 and 64×128 tiles crossed, row0, shards",
      on(path, async (gpu) => {
        const shapes: Record<string, number | string>[] = [
          { w: "q4g32", scale: "f16", K: 224, M: 37, N: 133, out: "act", bias: 0 },
          { w: "q4g64", scale: "bf16", K: 2560, M: 130, N: 67, out: "f32", bias: 1 },
          { w: "q4g128", scale: "bf16", K: 384, M: 65, N: 260, out: "add", bias: 1, row0: 3 },
          {
            w: "q4g64",
            scale: "f16",
            K: 320,
            M: 70,
            N: 131,
            out: "act",
            bias: 1,
            shards: 2,
            noff: 5,
            pad: 3,
            row0: 2,
          },
        ];
        // wideN 4096: these small grids take 64-column tiles (NARROW_TILE, 128 lanes, the next stage fetched
        // during the multiply); wideN 1 or wideTileMinWorkgroups 0: 128-column tiles (the next stage fetched
        // right before it is stored); two 32-value sub-tiles per stage (K = 224, 2560, 384, 320: odd and even
        // sub-tile counts); splitK: K summed in 2 or 3 parts by matmul_splitk.wgsl, which applies the
        // epilogue (bias, add, act), in narrow and wide tiles.
        for (
          const t of [
            { wideN: 4096 },
            { wideN: 1 },
            { wideN: 4096, wideTileMinWorkgroups: 0 },
            { wideN: 4096, splitK: 2 },
            { wideN: 4096, splitK: 3, wideTileMinWorkgroups: 0 },
            { wideN: 4096, splitK: 3 },
          ]
        ) {
          const g = gpu.withProfile({ matmul: { tiled: t } });
          for (const [k, s] of shapes.entries()) {
            await expectCase(g, matmulTiledCase, { ...s, x8: 1 }, 50 + k);
          }
        }
      }),
    );

    test(
      "int8 x: both tile shapes give the same bits (64 columns fetched ahead, " +
        "128 fetched right before the store)",
      on(path, async (gpu) => {
        for (const s of [{ K: 224, N: 70 }, { K: 320, N: 133 }]) {
          const i = matmulInputs(gpu, "tiled", { w: "q4g32", x8: 1, M: 67, ...s });
          const yOn = (wideTileMinWorkgroups: number) =>
            yOf(gpu.withProfile({ matmul: { tiled: { wideN: 4096, wideTileMinWorkgroups } } }), i);
          expectBitwise(await yOn(0), await yOn(1e9), `128- vs 64-column tiles, ${JSON.stringify(s)}`);
        }
      }),
    );

    test(
      "int8 x only where the device has dot4I8Packed and one subgroup size (else the f32-x kernels)",
      on(path, (gpu) => {
        const w = {
          format: { kind: "q" as const, bits: 4, groupSize: 64, scaleF16: false },
          K: 4096,
          N: 4096,
        };
        for (const mode of ["vec", "tiled"] as const) {
          const { info, profile } = gpu;
          expect(usesInt8X(gpu, w, mode), `${mode} on this device`).toBe(info.int8Dot && info.subgroups);
          expect(
            usesInt8X({ info: { ...info, int8Dot: false }, profile }, w, mode),
            `${mode} without dot4I8Packed`,
          ).toBe(false);
          const varying = { ...info, subgroupMaxSize: 2 * info.subgroupMinSize };
          expect(usesInt8X({ info: varying, profile }, w, mode), `${mode}, varying subgroups`).toBe(false);
        }
        return Promise.resolve();
      }),
    );

    test(
      "batch invariance: each row's bits are the same whatever M and tile position",
      on(path, async (gpu) => {
        const cases: Record<string, number | string>[] = [
          { w: "q4g64", K: 320, x8: 0 },
          { w: "q4g64", K: 320, x8: 1 },
          { w: "q4g64", K: 320, x8: 1, N: 4100 },
          { w: "q4g64", K: 320, x8: 1, splitk: 2 },
          { w: "q6g32", K: 224, x8: 0 },
          { w: "bf16", K: 200, x8: 0 },
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
