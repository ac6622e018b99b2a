/** Host wrapper of the element-wise kernel `silu_mul.wgsl`. @module */
import { grid1d } from "../gpu/kernel.ts";
import { type OpContext, record } from "./context.ts";

/** h[r, i] = silu(gu[r, i]) · gu[r, I + i] for rows row0 .. row0+R (row0 default 0). */
export async function siluMul(
  ctx: OpContext,
  a: { gu: GPUBuffer; h: GPUBuffer; R: number; I: number; row0?: number },
): Promise<void> {
  const WG = 256;
  await record(ctx, { file: "silu_mul.wgsl", overrides: { WG } }, {
    buffers: { gu: a.gu, h: a.h },
    params: { R: a.R, I: a.I, row0: a.row0 ?? 0 },
    grid: grid1d(Math.ceil((a.R * a.I) / WG)),
  });
}
