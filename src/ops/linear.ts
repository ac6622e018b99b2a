/**
 * Weights of one linear layer (W is [N, K], HF/MLX layout) as they live on the GPU, and the kernel
 * defines that select the matching weight decoder.
 * @module
 */
import type { Defines } from "../gpu/preprocess.ts";

export type WeightFormat =
  | { kind: "q"; bits: number; groupSize: number; scaleF16: boolean } // MLX affine
  | { kind: "f16" }
  | { kind: "bf16" };

/** Rows [n0, n0 + n) of W in their own buffers (a matrix over the 2 GiB binding limit is split by rows). */
export interface WeightShard {
  n0: number;
  n: number;
  w: GPUBuffer;
  scales?: GPUBuffer;
  biases?: GPUBuffer;
}

export interface Linear {
  name: string;
  N: number;
  K: number;
  format: WeightFormat;
  shards: WeightShard[];
  /** Real bias (e.g. Qwen2 q/k/v), f32 [N]. */
  bias?: GPUBuffer;
}

/** Defines + overrides for matmul_vec/matmul_tiled/embed given a weight format. */
export function formatVariant(f: WeightFormat, kernel: "vec" | "tiled" | "embed"): {
  defines: Defines;
  overrides: Record<string, number>;
} {
  if (f.kind === "f16") return { defines: { WF16: 1 }, overrides: {} };
  if (f.kind === "bf16") return { defines: { WBF16: 1 }, overrides: {} };
  const defines: Defines = {};
  if (f.scaleF16) defines.SCALE_F16 = 1;
  if (kernel === "vec") defines[f.bits === 4 ? "Q4" : f.bits === 8 ? "Q8" : "QGEN"] = 1;
  if (kernel === "tiled" && f.bits === 4) defines.Q4 = 1;
  if (kernel === "embed") defines.QUANT = 1;
  return { defines, overrides: { BITS: f.bits, GS: f.groupSize } };
}

/** Bytes of W (with scales and biases) per weight, for memory and bandwidth accounting. */
export function bitsPerWeight(f: WeightFormat): number {
  return f.kind === "q" ? f.bits + 32 / f.groupSize : 16;
}

/** Experts [e0, e0 + count) of a stack, in one buffer (a stack over the binding limit splits by expert). */
export interface ExpertShard {
  e0: number;
  count: number;
  w: GPUBuffer;
  scales?: GPUBuffer;
  biases?: GPUBuffer;
}

/**
 * One projection of every expert of an MoE layer, stacked: expert e's W [N, K] is rows (e − e0)·N .. +N − 1
 * of its shard, each row encoded as a dense Linear's row (`format`).
 */
export interface ExpertLinear {
  name: string;
  /** Experts in the stack. */
  E: number;
  /** Rows per expert (gate|up stacks: 2·intermediate, gate rows first). */
  N: number;
  K: number;
  format: WeightFormat;
  shards: ExpertShard[];
}
