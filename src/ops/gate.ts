/** Host wrapper of `sigmoid_gate.wgsl`, the output gate of gated attention. @module */
import { grid1d } from "../gpu/kernel.ts";
import { type OpContext, record } from "./context.ts";

/** y[r, i] ·= sigmoid(gate[r, i]) for rows row0 .. row0+R (row0 default 0); gate act, y f32. */
export async function sigmoidGate(
  ctx: OpContext,
  a: { gate: GPUBuffer; y: GPUBuffer; R: number; W: number; row0?: number },
): Promise<void> {
  const WG = 256;
  await record(ctx, { file: "sigmoid_gate.wgsl", overrides: { WG } }, {
    buffers: { gate: a.gate, y: a.y },
    params: { R: a.R, W: a.W, row0: a.row0 ?? 0 },
    grid: grid1d(Math.ceil((a.R * a.W) / WG)),
  });
}
