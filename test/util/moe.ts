/** Shared pieces of the MoE expert-matmul tests (test/ops/moe_matmul_test.ts). */
import type { Gpu } from "../../src/gpu/device.ts";
import { bindMoeMatmul, makeMoeMatmul, moeTiledCase, moeVecCase } from "../../src/lab/cases/moe_matmul.ts";
import { runOnce } from "../../src/lab/harness.ts";
import { Rng } from "../../src/lab/rng.ts";

/** Formats with a K that is a few groups long (an odd number of 32-value units where the group allows). */
export const FORMATS = [
  { w: "q4g64", scale: "bf16", K: 192 },
  { w: "q4g64", scale: "f16", K: 192 },
  { w: "q4g32", scale: "f16", K: 160 },
  { w: "q4g128", scale: "bf16", K: 384 },
  { w: "q8g32", scale: "bf16", K: 160 },
  { w: "q8g64", scale: "f16", K: 192 },
  { w: "q8g128", scale: "bf16", K: 384 },
  { w: "bf16", scale: "bf16", K: 96 },
  { w: "f16", scale: "bf16", K: 96 },
];

/** gate_up reduces over H and writes I columns; down reduces over I and writes H columns (both odd here). */
export function opShape(op: "gate_up" | "down", K: number, cols = 37): Record<string, number | string> {
  return op === "gate_up" ? { op, H: K, I: cols } : { op, I: K, H: cols };
}

/**
 * y (and the grouping words; x under combine) of one run, optionally as blocks of rows over the same
 * buffers; `split`: combine as moeDown into y then moeCombine.
 */
export async function outputsOf(
  gpu: Gpu,
  mode: "vec" | "tiled",
  shape: Record<string, number | string>,
  parts?: { M: number; row0: number }[],
  opts: { split?: boolean } = {},
): Promise<Record<string, Float64Array>> {
  const c = mode === "vec" ? moeVecCase : moeTiledCase;
  const i = makeMoeMatmul(mode, { ...c.small, ...shape }, new Rng(77), {
    act: gpu.info.f16 ? "f16" : "f32",
    maxBinding: gpu.info.maxBinding,
  });
  const b = await bindMoeMatmul(gpu, i, parts, opts);
  try {
    runOnce(b);
    return await b.read();
  } finally {
    b.destroy();
  }
}
