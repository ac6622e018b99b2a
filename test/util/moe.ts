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

/** The x8 shape values to run a format with: 4-bit experts on int8 x and on f32 x, others as they are. */
export function x8s(w: string): number[] {
  return w.startsWith("q4") ? [1, 0] : [1];
}

/** The labels of the kernels one vector-mode run records (which file the wrappers took). */
export async function kernelsOf(gpu: Gpu, shape: Record<string, number | string>): Promise<string[]> {
  const i = makeMoeMatmul("vec", { ...moeVecCase.small, ...shape }, new Rng(77), {
    act: "f32",
    maxBinding: gpu.info.maxBinding,
  });
  const b = await bindMoeMatmul(gpu, i);
  b.destroy();
  return b.ctx.list.map((d) => d.kernel.label);
}

/** Each op plain and with its vector-mode fusion (gate_up: the norm; down: the combine, shared expert). */
export const FUSED: { op: "gate_up" | "down"; fuse: Record<string, number> }[] = [
  { op: "gate_up", fuse: {} },
  { op: "gate_up", fuse: { norm: 1 } },
  { op: "down", fuse: {} },
  { op: "down", fuse: { combine: 1, shared: 1 } },
];

/** Rows 0 .. M − 1 as M blocks of one row (batch invariance: each row alone). */
export function alone(M: number): { M: number; row0: number }[] {
  return Array.from({ length: M }, (_, r) => ({ M: 1, row0: r }));
}
