/**
 * matmul_vec.wgsl and matmul_tiled.wgsl through src/ops/matmul.ts, against the float64 reference
 * (src/lab/ref/matmul.ts) on both activation paths. Every weight format (MLX affine 2/3/4/5/6/8 bits with
 * two group sizes each, f16, bf16) with each epilogue (act; f32 + bias; add + bias), odd sizes that are not
 * multiples of the workgroup or tile, row shards with column offsets, and batch invariance (a row's bits do
 * not depend on the other rows of the step).
 * x is f32 on both paths. Tolerances (src/lab/cases/matmul.ts): f32 outputs |d| ≤ 2e-7·√K + 1e-6 +
 * 1e-5·|ref| (f32 accumulation); act outputs on the f16 path |d| ≤ 2e-7·√K + 1.1e-5 + 1e-3·|ref| (plus
 * the f16 rounding of y).
 */
import { describe, test } from "vitest";
import {
  bindMatmul,
  makeMatmul,
  type MatmulInputs,
  matmulTiledCase,
  matmulVecCase,
} from "../../src/lab/cases/matmul.ts";
import { runOnce } from "../../src/lab/harness.ts";
import { Rng } from "../../src/lab/rng.ts";
import type { Gpu } from "../../src/gpu/device.ts";
import { devices, expectBitwise, expectCase } from "../util/lab.ts";

/** Every MLX affine width with two group sizes (scale dtype alternating), then the 16-bit formats. */
const FORMATS: { w: string; scale: string }[] = [
  { w: "q2g32", scale: "f16" },
  { w: "q2g128", scale: "bf16" },
  { w: "q3g32", scale: "bf16" },
  { w: "q3g64", scale: "f16" },
  { w: "q4g64", scale: "f16" },
  { w: "q4g128", scale: "bf16" },
  { w: "q5g32", scale: "f16" },
  { w: "q5g128", scale: "bf16" },
  { w: "q6g64", scale: "bf16" },
  { w: "q6g128", scale: "f16" },
  { w: "q8g32", scale: "bf16" },
  { w: "q8g64", scale: "f16" },
  { w: "f16", scale: "bf16" },
  { w: "bf16", scale: "bf16" },
];

/** K: a few groups, an odd number of 32-value units; 16-bit K = 200 is not a multiple of 32 (the tiled k-tile). */
function kFor(w: string): number {
  const g = /g(\d+)$/.exec(w);
  return g ? { 32: 224, 64: 320, 128: 384 }[Number(g[1])]! : 200;
}

const EPILOGUES = [{ out: "act", bias: 0 }, { out: "f32", bias: 1 }, { out: "add", bias: 1 }];

const { on } = devices();

for (const path of ["f16", "f32"] as const) {
  describe(`matmul, ${path} activations`, () => {
    for (const f of FORMATS) {
      // Vec: M = 13 is three full blocks of 4 rows and one partial; N = 67 is not a multiple of any team count.
      test(
        `vec ${f.w} (${f.scale} scales): act, f32 + bias, add + bias; M=13 N=67 K=${kFor(f.w)}`,
        on(path, async (gpu) => {
          for (const [s, e] of EPILOGUES.entries()) {
            await expectCase(gpu, matmulVecCase, { ...f, ...e, M: 13, N: 67, K: kFor(f.w) }, 10 + s);
          }
        }),
      );
      // Tiled: N above one tile, neither M nor N a multiple of 64 (the M and N sweep below crosses more tiles).
      test(
        `tiled ${f.w} (${f.scale} scales): act, f32 + bias, add + bias; M=37 N=133 K=${kFor(f.w)}`,
        on(path, async (gpu) => {
          for (const [s, e] of EPILOGUES.entries()) {
            await expectCase(gpu, matmulTiledCase, { ...f, ...e, M: 37, N: 133, K: kFor(f.w) }, 20 + s);
          }
        }),
      );
    }

    test(
      "vec: M = 1, 3, 5, 13 for Q4, Q8, general-bit and 16-bit paths, short and long K",
      on(path, async (gpu) => {
        // K = 2176 (68 units) and 16-bit K = 1096 need more lanes per column than a subgroup (tree reduction).
        for (
          const s of [
            { w: "q4g64", K: 320 },
            { w: "q4g64", K: 2176 },
            { w: "q8g32", K: 224 },
            { w: "q3g64", K: 2176 },
            { w: "bf16", K: 1096 },
            { w: "f16", K: 40 },
          ]
        ) {
          for (const M of [1, 3, 5, 13]) {
            await expectCase(gpu, matmulVecCase, { ...s, M, N: 37, out: "f32" }, M);
          }
        }
      }),
    );

    test(
      "tiled: M = 1, 5, 64, 129 and N = 1, 64, 191",
      on(path, async (gpu) => {
        for (const [M, N] of [[1, 191], [5, 64], [64, 1], [129, 191]]) {
          await expectCase(gpu, matmulTiledCase, { w: "q4g64", K: 320, M, N, out: "act" }, M + N);
        }
      }),
    );

    test(
      "row shards with a bias, column offset, padded ldy and row0 > 0",
      on(path, async (gpu) => {
        for (const c of [matmulVecCase, matmulTiledCase]) {
          for (const out of ["act", "add"]) {
            await expectCase(gpu, c, {
              w: "q5g32",
              K: 224,
              M: c === matmulVecCase ? 6 : 70,
              N: 131,
              shards: 2,
              bias: 1,
              noff: 5,
              pad: 3,
              row0: 2,
              out,
            }, 3);
          }
        }
      }),
    );

    test(
      "vec batch invariance: each row's bits are the same at M = 1 as inside M = 13 or other blocks",
      on(path, async (gpu) => {
        for (
          const s of [{ w: "q4g64", K: 320 }, { w: "q4g64", K: 2176 }, { w: "q8g32", K: 224 }, {
            w: "q3g64",
            K: 320,
          }, { w: "f16", K: 1096 }]
        ) {
          const i = inputs(gpu, "vec", { ...s, M: 13, N: 45 });
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

    test(
      "tiled batch invariance: each row's bits are the same whatever M and tile position",
      on(path, async (gpu) => {
        for (const s of [{ w: "q4g64", K: 320 }, { w: "q6g32", K: 224 }, { w: "bf16", K: 200 }]) {
          const i = inputs(gpu, "tiled", { ...s, M: 137, N: 70 });
          const full = await yOf(gpu, i);
          const a = await yOf(gpu, i, [{ M: 1, row0: 0 }, { M: 63, row0: 1 }, { M: 73, row0: 64 }]);
          const b = await yOf(gpu, i, [{ M: 5, row0: 0 }, { M: 128, row0: 5 }, { M: 4, row0: 133 }]);
          expectBitwise(a, full, `${s.w}: M=1,63,73 vs M=137`);
          expectBitwise(b, full, `${s.w}: M=5,128,4 vs M=137`);
        }
      }),
    );
  });
}

function inputs(gpu: Gpu, mode: "vec" | "tiled", s: Record<string, number | string>): MatmulInputs {
  const c = mode === "vec" ? matmulVecCase : matmulTiledCase;
  return makeMatmul(mode, { ...c.small, out: "f32", ...s }, new Rng(99), {
    act: gpu.info.f16 ? "f16" : "f32",
    maxBinding: gpu.info.maxBinding,
  });
}

async function yOf(gpu: Gpu, i: MatmulInputs, parts?: { M: number; row0: number }[]): Promise<Float64Array> {
  const b = await bindMatmul(gpu, i, parts);
  try {
    runOnce(b);
    return (await b.read()).y;
  } finally {
    b.destroy();
  }
}
