/** Shared pieces of the matmul kernel tests (test/ops/matmul_vec_test.ts, matmul_tiled_test.ts). */
import type { Gpu } from "../../src/gpu/device.ts";
import {
  bindMatmul,
  makeMatmul,
  type MatmulInputs,
  matmulTiledCase,
  matmulVecCase,
} from "../../src/lab/cases/matmul.ts";
import { runOnce } from "../../src/lab/harness.ts";
import { Rng } from "../../src/lab/rng.ts";

/** Every MLX affine width with two group sizes (scale dtype alternating), then the 16-bit formats. */
export const FORMATS: { w: string; scale: string }[] = [
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

/**
 * K: a few groups, an odd number of 32-value units; 16-bit K = 200 is not a multiple of 32 (the tiled
 * k-tile).
 */
export function kFor(w: string): number {
  const g = /g(\d+)$/.exec(w);
  return g ? { 32: 224, 64: 320, 128: 384 }[Number(g[1])]! : 200;
}

/** Each epilogue, the f32 ones with a bias. */
export const EPILOGUES = [{ out: "act", bias: 0 }, { out: "f32", bias: 1 }, { out: "add", bias: 1 }];

/** Seeded inputs for one shape (f32 output, so batch-invariance checks see every bit). */
export function matmulInputs(
  gpu: Gpu,
  mode: "vec" | "tiled",
  s: Record<string, number | string>,
): MatmulInputs {
  const c = mode === "vec" ? matmulVecCase : matmulTiledCase;
  return makeMatmul(mode, { ...c.small, out: "f32", ...s }, new Rng(99), {
    act: gpu.info.f16 ? "f16" : "f32",
    maxBinding: gpu.info.maxBinding,
  });
}

/** y after running the inputs' matmul, or one matmul per {M, row0} block of `parts`. */
export async function yOf(
  gpu: Gpu,
  i: MatmulInputs,
  parts?: { M: number; row0: number }[],
): Promise<Float64Array> {
  const b = await bindMatmul(gpu, i, parts);
  try {
    runOnce(b);
    return (await b.read()).y;
  } finally {
    b.destroy();
  }
}
