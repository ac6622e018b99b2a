/** Host wrapper of `rms_norm.wgsl`. @module */
import { type OpContext, record } from "./context.ts";

export interface RmsNormArgs {
  /** Input rows (*, H) f32 (the residual). */
  x: GPUBuffer;
  /** Weight (H) f32. */
  weight: GPUBuffer;
  /** Output (R, H) f32 (a matmul input), or with `add` the residual the norm is added to. */
  y: GPUBuffer;
  R: number;
  H: number;
  eps: number;
  /** Optional (R) u32 source-row indices: normalises only the rows that need logits. */
  gather?: GPUBuffer;
  /** First row of x and y (default 0; not with `gather`). */
  row0?: number;
  /**
   * y[r] += rmsNorm(x[r])·weight instead of y[r] = … (Gemma's post-attention and post-feedforward norms, on
   * the sublayer output before the residual add). y must be another buffer than x.
   */
  add?: boolean;
}

export async function rmsNorm(ctx: OpContext, a: RmsNormArgs): Promise<void> {
  const WG = a.H >= 1024 ? 256 : 64;
  const buffers: Record<string, GPUBuffer> = { x: a.x, weight: a.weight, y: a.y };
  if (a.gather) buffers.idx = a.gather;
  const defines = { ...(a.gather ? { GATHER: 1 } : {}), ...(a.add ? { ADD: 1 } : {}) };
  await record(ctx, { file: "rms_norm.wgsl", defines, overrides: { WG } }, {
    buffers,
    params: { R: a.R, H: a.H, eps: a.eps, row0: a.row0 ?? 0 },
    grid: [a.R, 1, 1],
  });
}
