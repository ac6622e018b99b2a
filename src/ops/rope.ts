/** Host wrapper of `rope.wgsl`: Q/K norm + RoPE, Q out, K/V into the paged cache. @module */
import type { StepShape } from "../gpu/kernel.ts";
import { check, type OpContext, record } from "./context.ts";
import { kv8Block } from "./kv8.ts";

export interface RopeArgs {
  rows: GPUBuffer;
  /** (R, (nq + 2·nkv)·hd) act, the fused QKV projection. */
  qkv: GPUBuffer;
  /** (rot/2) f32. */
  invFreq: GPUBuffer;
  qNorm?: GPUBuffer;
  kNorm?: GPUBuffer;
  pages: GPUBuffer;
  /** This layer's KV pool (pages, 2, nkv, ps, hd) act, or q8 codes with `kvScale`. */
  kv: GPUBuffer;
  /** The q8 cache's scales (src/lab/ref/kv8.ts): K/V are quantized as they are written. */
  kvScale?: GPUBuffer;
  /** (R, nq·hd) act. */
  q: GPUBuffer;
  /** Rows row0 .. row0+R−1 (row0 default 0). */
  R: number;
  row0?: number;
  /** Rows whose KV length (pos + 1) is below this are skipped (default 0). */
  minLen?: number;
  /** Recorded, but dispatched only in steps where this holds. */
  when?: (s: StepShape) => boolean;
  nq: number;
  nkv: number;
  hd: number;
  rot: number;
  pageSize: number;
  maxPages: number;
  eps: number;
  mscale: number;
}

export async function rope(ctx: OpContext, a: RopeArgs): Promise<void> {
  check(a.hd <= 512 && a.rot % 2 === 0 && a.rot <= a.hd, "rope", `hd=${a.hd} rot=${a.rot}`);
  check(!!a.qNorm === !!a.kNorm, "rope", "q_norm and k_norm come together");
  const buffers: Record<string, GPUBuffer> = {
    rows: a.rows,
    qkv: a.qkv,
    inv_freq: a.invFreq,
    pages: a.pages,
    kv: a.kv,
    q: a.q,
  };
  if (a.qNorm) Object.assign(buffers, { qn: a.qNorm, kn: a.kNorm });
  if (a.kvScale) buffers.kvs = a.kvScale;
  const defines = { ...(a.qNorm ? { QK_NORM: 1 } : {}), ...(a.kvScale ? { KV8: 1 } : {}) };
  const overrides = { WG: 64, ...(a.kvScale ? { QB: kv8Block(a.hd) } : {}) };
  await record(ctx, { file: "rope.wgsl", defines, overrides }, {
    buffers,
    params: {
      row0: a.row0 ?? 0,
      min_len: a.minLen ?? 0,
      nq: a.nq,
      nkv: a.nkv,
      hd: a.hd,
      rot: a.rot,
      ps: a.pageSize,
      max_pages: a.maxPages,
      eps: a.eps,
      mscale: a.mscale,
    },
    grid: a.when ? (s) => (a.when!(s) ? [a.R, a.nq + a.nkv, 1] : [0, 0, 0]) : [a.R, a.nq + a.nkv, 1],
  });
}
