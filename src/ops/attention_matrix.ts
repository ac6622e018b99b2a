/**
 * Host wrapper of prefill attention on matrix units (`attention_prefill_sgmat.wgsl`, Dawn's subgroup
 * matrices): q·k and P·V as f16 × f16 → f32 16×16×16 products, the online softmax in f32 between them.
 * `attentionPrefill` (attention.ts) takes this path wherever `usesMatrixAttention` says so.
 * @module
 */
import type { Gpu } from "../gpu/device.ts";
import { matrixKernelsFit } from "../platform/mod.ts";
import type { PrefillAttentionArgs } from "./attention.ts";
import { type OpContext, record } from "./context.ts";

/** The kernel's workgroup memory: the K/V tile, S and P (see its header). */
const WORKGROUP_BYTES = 64 * 136 * 2 + 4 * 16 * 72 * 4 + 4 * 16 * 72 * 2 + 16;

/**
 * Whether this segment's attention runs on matrix units: the profile's `prefillAttention.matrixUnits` (and
 * `matrixUnitsQ8` for the q8 cache), an adapter offering f16 × f16 → f32 16×16×16 subgroup matrices with
 * subgroups of 32 and enough workgroup memory, and head dim 128.
 */
export function usesMatrixAttention(
  gpu: Pick<Gpu, "info" | "profile">,
  a: { hd: number; kvScale?: unknown },
): boolean {
  const p = gpu.profile.prefillAttention;
  return p.matrixUnits && (!a.kvScale || p.matrixUnitsQ8) && a.hd === 128 &&
    matrixKernelsFit(gpu.info, WORKGROUP_BYTES);
}

/** What attention.ts resolves for every prefill kernel: the q8 cache's binding, WINDOW, and the params. */
export interface CacheVariant {
  buffers: Record<string, GPUBuffer>;
  defines: Record<string, number>;
  overrides: Record<string, number>;
  params: Record<string, number>;
}

/**
 * Causal attention of one prefill segment on matrix units: a workgroup holds 16 rows of each of 4 query heads
 * of one kv head (or 32 of 2, 64 of 1, the largest that divides the group).
 */
export async function attentionPrefillMatrix(
  ctx: OpContext,
  a: PrefillAttentionArgs,
  v: CacheVariant,
): Promise<void> {
  const G = a.nq / a.nkv;
  const GH = G % 4 === 0 ? 4 : G % 2 === 0 ? 2 : 1;
  await record(ctx, {
    file: "attention_prefill_sgmat.wgsl",
    defines: { ...(a.kvScale ? {} : { F16_TILES: 1 }), ...v.defines },
    // BK: the key tile WINDOW's first_tile() rounds down to.
    overrides: {
      HD: a.hd,
      BK: 64,
      G,
      GH,
      TAU: ctx.gpu.profile.prefillAttention.matrixRescaleMargin,
      ...v.overrides,
    },
  }, {
    buffers: { rows: a.rows, q: a.q, pages: a.pages, kv: a.kv, out: a.out, ...v.buffers },
    params: v.params,
    grid: [Math.ceil(a.S / (64 / GH)), a.nkv * (G / GH), 1],
  });
}
