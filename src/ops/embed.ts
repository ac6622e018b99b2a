/**
 * Host wrapper of `embed.wgsl`: token rows of the (possibly quantized) embedding table into the f32 residual.
 * @module
 */
import { check, type OpContext, record } from "./context.ts";
import { formatVariant, type Linear } from "./linear.ts";

export interface EmbedArgs {
  /** Step rows (R) with .token. */
  rows: GPUBuffer;
  /** The table as a linear layer: N = vocab, K = hidden. */
  table: Linear;
  /** Residual (R, hidden) f32. */
  x: GPUBuffer;
  R: number;
  /** Multiplies every embedding (default 1). */
  scale?: number;
}

export async function embed(ctx: OpContext, a: EmbedArgs): Promise<void> {
  const H = a.table.K;
  if (a.table.format.kind === "q") {
    check(H % a.table.format.groupSize === 0, "embed", `hidden ${H} not a multiple of the group size`);
  }
  const { defines, overrides } = formatVariant(a.table.format, "embed");
  const WG = 64;
  for (const s of a.table.shards) {
    const buffers: Record<string, GPUBuffer> = { rows: a.rows, w: s.w, x: a.x };
    if (s.scales) buffers.scales = s.scales;
    if (s.biases) buffers.biases = s.biases;
    await record(ctx, { file: "embed.wgsl", defines, overrides: { ...overrides, WG } }, {
      buffers,
      params: { R: a.R, H, row_lo: s.n0, row_hi: s.n0 + s.n, scale: a.scale ?? 1 },
      grid: [a.R, Math.ceil(H / WG), 1],
    });
  }
}
