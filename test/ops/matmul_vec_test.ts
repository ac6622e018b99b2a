/**
 * matmul_vec.wgsl (decode rows) through src/ops/matmul.ts against the float64 reference
 * (src/lab/ref/matmul.ts), on both activation paths: every weight format (MLX affine 2/3/4/5/6/8 bits with
 * two group sizes each, f16, bf16) with each epilogue (act; f32 + bias; add + bias); M = 1, 3, 5, 13 (blocks
 * of 4 rows); N not a multiple of any team count; K short (subgroup team reduction) and long (workgroup
 * tree); row shards with column offsets; batch invariance (a row's bits are the same alone or in a batch).
 * x is f32 on both paths; 4-bit weights also run with int8 x (matmul_vec_q4x8.wgsl, shape key x8 = 1, the
 * default where the device allows it), against a reference that quantizes x the same way. Tolerances
 * (src/lab/cases/matmul.ts): f32 outputs |d| ≤ 2e-7·√K + 1e-6 + 1e-5·|ref| (f32 accumulation); act outputs
 * on the f16 path |d| ≤ 2e-7·√K + 1.1e-5 + 1e-3·|ref| (plus the f16 rounding of y).
 */
import { describe, test } from "vitest";
import { matmulVecCase } from "../../src/lab/cases/matmul.ts";
import type { MatmulProfile } from "../../src/gpu/profile.ts";
import { devices, expectBitwise, expectCase } from "../util/lab.ts";
import { EPILOGUES, FORMATS, kFor, matmulInputs, yOf } from "../util/matmul.ts";

const { on } = devices();

for (const path of ["f16", "f32"] as const) {
  describe(`matmul_vec, ${path} activations`, () => {
    for (const f of FORMATS) {
      // M = 13 is three full blocks of 4 rows and one partial; N = 67 is not a multiple of any team count.
      test(
        `${f.w} (${f.scale} scales): act, f32 + bias, add + bias; M=13 N=67 K=${kFor(f.w)}`,
        on(path, async (gpu) => {
          for (const [s, e] of EPILOGUES.entries()) {
            await expectCase(gpu, matmulVecCase, { ...f, ...e, M: 13, N: 67, K: kFor(f.w) }, 10 + s);
          }
        }),
      );
    }

    test(
      "M = 1, 3, 5, 13 for Q4, Q8, general-bit and 16-bit paths, short and long K",
      on(path, async (gpu) => {
        // K = 2176 (68 units) and 16-bit K = 1096 need more lanes per column than a subgroup (tree
        // reduction).
        for (
          const s of [
            { w: "q4g64", K: 320, x8: 1 },
            { w: "q4g64", K: 2176, x8: 1 },
            { w: "q4g64", K: 2176, x8: 0 },
            { w: "q8g32", K: 224, x8: 1 },
            { w: "q3g64", K: 2176, x8: 1 },
            { w: "bf16", K: 1096, x8: 1 },
            { w: "f16", K: 40, x8: 1 },
          ]
        ) {
          for (const M of [1, 3, 5, 13]) {
            await expectCase(gpu, matmulVecCase, { ...s, M, N: 37, out: "f32" }, M);
          }
        }
      }),
    );

    test(
      "row shards with a bias, column offset, padded ldy and row0 > 0",
      on(path, async (gpu) => {
        for (const out of ["act", "add"]) {
          const s = { w: "q5g32", K: 224, M: 6, N: 131, shards: 2, bias: 1, noff: 5, pad: 3, row0: 2, out };
          await expectCase(gpu, matmulVecCase, s, 3);
        }
      }),
    );

    test(
      "profile shapes: 2 and 4 columns per team, 1 and 3 chunks per lane, 128-lane workgroups, " +
        "teams of 8 and 96 lanes",
      on(path, async (gpu) => {
        const variants: Partial<MatmulProfile["vector"]>[] = [
          { columnsPerTeam: 2 },
          { columnsPerTeam: 4 },
          { chunksPerLane: 1 },
          { chunksPerLane: 3 },
          { workgroupSize: 128 },
          { lanesPerTeam: 8 },
          { lanesPerTeam: 96 },
        ];
        for (const v of variants) {
          const g = gpu.withProfile({ matmul: { vector: v } });
          for (
            const s of [{ w: "q4g64", K: 320, x8: 0 }, { w: "q6g32", K: 224, x8: 1 }, {
              w: "bf16",
              K: 200,
              x8: 1,
            }]
          ) {
            for (const M of [1, 6]) {
              await expectCase(g, matmulVecCase, { ...s, M, N: 67, out: "f32", bias: 1 }, M);
            }
          }
        }
      }),
    );

    test(
      "fused RMSNorm (decode rows): every format family, M = 1 and 6, each epilogue, row0 > 0",
      on(path, async (gpu) => {
        for (
          const [w, x8] of [
            ["q4g64", 1],
            ["q4g64", 0],
            ["q4g128", 1],
            ["q4g128", 0],
            ["q8g32", 1],
            ["q3g64", 1],
            ["bf16", 1],
            ["f16", 1],
          ] as const
        ) {
          for (const [s, e] of EPILOGUES.entries()) {
            for (const M of [1, 6]) {
              await expectCase(
                gpu,
                matmulVecCase,
                { w, x8, ...e, M, N: 53, K: kFor(w), norm: 1, row0: 1 },
                20 + s + M,
              );
            }
          }
        }
        // A long row: the Q4 team spans several subgroups.
        await expectCase(
          gpu,
          matmulVecCase,
          { w: "q4g64", M: 3, N: 21, K: 4096, norm: 1, out: "f32", x8: 0 },
          7,
        );
        await expectCase(gpu, matmulVecCase, { w: "q4g64", M: 3, N: 21, K: 4096, norm: 1, out: "f32" }, 7);
      }),
    );

    test(
      "fused SwiGLU (W = [gate | up], 4-bit): h = silu(gate)·up, with and without the fused norm, I odd, " +
        "row0 > 0",
      on(path, async (gpu) => {
        for (
          const [k, s] of [
            { M: 1, N: 106, norm: 1, row0: 0, noff: 0, pad: 0 },
            { M: 6, N: 106, norm: 1, row0: 2, noff: 0, pad: 0 },
            { M: 3, N: 42, norm: 0, row0: 0, noff: 3, pad: 2 },
          ].entries()
        ) {
          for (const x8 of [1, 0]) {
            await expectCase(gpu, matmulVecCase, { w: "q4g64", K: 320, out: "swiglu", x8, ...s }, 30 + k);
          }
        }
        for (const x8 of [1, 0]) {
          await expectCase(gpu, matmulVecCase, {
            w: "q4g32",
            K: 2560,
            M: 2,
            N: 38,
            out: "swiglu",
            norm: 1,
            x8,
          }, 34);
        }
      }),
    );

    test(
      "int8 x (4-bit): group sizes 32/64/128, long K, blocks of 4 rows or one, " +
        "workgroups of 32-256 lanes, every epilogue",
      on(path, async (gpu) => {
        for (const WG of [32, 128, 256]) {
          const g = gpu.withProfile({ matmul: { vectorInt8: { workgroupSize: WG, wideWorkgroupSize: WG } } });
          for (
            const [k, s] of [
              { w: "q4g32", K: 224, M: 1, N: 67, out: "add", norm: 0, bias: 0 },
              { w: "q4g128", K: 384, M: 5, N: 67, out: "act", norm: 1, bias: 0 },
              { w: "q4g64", K: 2560, M: 9, N: 45, out: "f32", norm: 1, bias: 1 },
              { w: "q4g64", K: 4096, M: 1, N: 38, out: "swiglu", norm: 1, bias: 0 },
              // Four rows of int8 x would pass 32 KiB of workgroup memory: rows one at a time (MB = 1) on
              // such devices.
              { w: "q4g64", K: 8192, M: 6, N: 21, out: "f32", norm: 1, bias: 0 },
            ].entries()
          ) {
            await expectCase(g, matmulVecCase, { ...s, x8: 1 }, 40 + k + WG);
          }
        }
      }),
    );

    test(
      "batch invariance: each row's bits are the same at M = 1 as inside M = 13 or other blocks",
      on(path, async (gpu) => {
        for (
          const s of [
            { w: "q4g64", K: 320, norm: 0, out: "f32", x8: 1 },
            { w: "q4g64", K: 2176, norm: 0, out: "f32", x8: 1 },
            { w: "q4g64", K: 2176, norm: 1, out: "f32", x8: 0 },
            { w: "q4g64", K: 320, norm: 1, out: "swiglu", x8: 0 },
            { w: "q8g32", K: 224, norm: 0, out: "f32", x8: 1 },
            { w: "q3g64", K: 320, norm: 0, out: "f32", x8: 1 },
            { w: "f16", K: 1096, norm: 0, out: "f32", x8: 1 },
            { w: "q4g64", K: 2176, norm: 1, out: "f32", x8: 1 },
            { w: "q8g32", K: 224, norm: 1, out: "f32", x8: 1 },
            { w: "q4g64", K: 320, norm: 1, out: "swiglu", x8: 1 },
          ]
        ) {
          const i = matmulInputs(gpu, "vec", { ...s, M: 13, N: s.out === "swiglu" ? 46 : 45 });
          const full = await yOf(gpu, i);
          const ones = await yOf(gpu, i, Array.from({ length: 13 }, (_, m) => ({ M: 1, row0: m })));
          const blocks = await yOf(gpu, i, [{ M: 5, row0: 0 }, { M: 3, row0: 5 }, { M: 2, row0: 8 }, {
            M: 3,
            row0: 10,
          }]);
          expectBitwise(ones, full, `${s.w} K=${s.K}: M=1 rows vs M=13`);
          expectBitwise(blocks, full, `${s.w} K=${s.K}: blocks of 5,3,2,3 vs M=13`);
        }
      }),
    );
  });
}
