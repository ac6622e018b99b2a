/** Host wrapper of the element-wise kernel `silu_mul.wgsl`. @module */
import { grid1d } from "../gpu/kernel.ts";
import { type OpContext, record } from "./context.ts";

/** The gate's activation: SwiGLU's silu, or Gemma's GELU with the tanh approximation (gelu_pytorch_tanh). */
export type GateAct = "silu" | "gelu_tanh";

/**
 * h[r, i] = act(gu[r, i]) · gu[r, I + i] for rows row0 .. row0+R (row0 default 0); act silu (default) or
 * gelu_tanh(g) = 0.5·g·(1 + tanh(√(2/π)·(g + 0.044715·g³))).
 */
export async function siluMul(
  ctx: OpContext,
  a: { gu: GPUBuffer; h: GPUBuffer; R: number; I: number; row0?: number; act?: GateAct },
): Promise<void> {
  const WG = 256;
  const defines: Record<string, number> = a.act === "gelu_tanh" ? { GELU_TANH: 1 } : {};
  await record(ctx, { file: "silu_mul.wgsl", defines, overrides: { WG } }, {
    buffers: { gu: a.gu, h: a.h },
    params: { R: a.R, I: a.I, row0: a.row0 ?? 0 },
    grid: grid1d(Math.ceil((a.R * a.I) / WG)),
  });
}
