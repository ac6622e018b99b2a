/**
 * Host wrappers of the attention kernels: split-K decode (`attention_decode.wgsl` + `attention_combine.wgsl`)
 * for decode rows, and the tiled online-softmax kernel (`attention_prefill.wgsl`) for prefill segments.
 * @module
 */
import { check, type OpContext, record } from "./context.ts";

/** Keys per split of decode attention: a row of length L uses ceil(L / SPLIT) workgroups per kv head. */
export const DECODE_SPLIT = 256;

interface Common {
  rows: GPUBuffer;
  q: GPUBuffer;
  pages: GPUBuffer;
  kv: GPUBuffer;
  /** (R, nq·hd) f32 (the o_proj input). */
  out: GPUBuffer;
  row0: number;
  nq: number;
  nkv: number;
  hd: number;
  pageSize: number;
  maxPages: number;
  scale: number;
}

export interface DecodeAttentionArgs extends Common {
  /** Decode rows row0 .. row0+D−1. */
  D: number;
  /** Scratch (R, nq, maxSplit, hd) f32 and (R, nq, maxSplit) vec2<f32>. */
  opart: GPUBuffer;
  ml: GPUBuffer;
  maxSplit: number;
}

export async function attentionDecode(ctx: OpContext, a: DecodeAttentionArgs): Promise<void> {
  const G = a.nq / a.nkv;
  check(Number.isInteger(G) && G <= 16, "attentionDecode", `nq=${a.nq} nkv=${a.nkv} (G must be an integer ≤ 16)`);
  check(a.hd <= 256 && 128 % (a.hd / 8) === 0, "attentionDecode", `head_dim ${a.hd} (8·2^k up to 256)`);
  check(a.hd % 8 === 0, "attentionDecode", `head_dim ${a.hd} must be a multiple of 8`);
  const L = a.hd / 8;
  const info = ctx.gpu.info;
  // The subgroup merge assumes a fixed subgroup size covering whole key groups.
  const sg = info.subgroupMinSize === info.subgroupMaxSize ? info.subgroupMinSize : 0;
  const useSg = info.subgroups && sg >= L && sg <= 128 && 128 % sg === 0;
  const defines = { G, ...(useSg ? { LANE_SUBGROUP: 1 } : {}) };
  const common = { rows: a.rows, pages: a.pages, kv: a.kv };
  await record(ctx, { file: "attention_decode.wgsl", defines, overrides: { HD: a.hd, SPLIT: DECODE_SPLIT, WG: 128, ...(useSg ? { SG: sg } : {}) } }, {
    buffers: { ...common, q: a.q, opart: a.opart, ml: a.ml, out: a.out },
    params: {
      row0: a.row0, nq: a.nq, nkv: a.nkv, ps: a.pageSize, max_pages: a.maxPages, max_split: a.maxSplit, scale: a.scale,
    },
    grid: (s) => [a.D, a.nkv, Math.min(a.maxSplit, Math.ceil(s.maxKvLen / DECODE_SPLIT))],
  });
  await record(ctx, { file: "attention_combine.wgsl", overrides: { HD: a.hd, SPLIT: DECODE_SPLIT } }, {
    buffers: { rows: a.rows, opart: a.opart, ml: a.ml, out: a.out },
    params: { row0: a.row0, nq: a.nq, max_split: a.maxSplit },
    // Not needed while every row fits in one split (attention_decode then writes `out` itself).
    grid: (s) => (s.maxKvLen > DECODE_SPLIT ? [a.D, a.nq, 1] : [0, 0, 0]),
  });
}

export interface PrefillAttentionArgs extends Common {
  /** Segment rows row0 .. row0+S−1: one sequence, consecutive positions. */
  S: number;
}

export async function attentionPrefill(ctx: OpContext, a: PrefillAttentionArgs): Promise<void> {
  const G = a.nq / a.nkv;
  check(Number.isInteger(G), "attentionPrefill", `nq=${a.nq} nkv=${a.nkv}`);
  const t = prefillTiles(a.hd, G, ctx.gpu.info.maxWorkgroupStorage);
  await record(ctx, {
    file: "attention_prefill.wgsl",
    defines: { OPL: t.OPL },
    overrides: { HD: a.hd, G, BQ: t.BQ, BK: t.BK, WG: t.WG },
  }, {
    buffers: { rows: a.rows, q: a.q, pages: a.pages, kv: a.kv, out: a.out },
    params: {
      row0: a.row0, S: a.S, nq: a.nq, nkv: a.nkv, ps: a.pageSize, max_pages: a.maxPages, scale: a.scale,
    },
    grid: [Math.ceil(a.S / t.BQ), a.nkv, 1],
  });
}

/** Tile sizes for prefill attention that fit the device's workgroup memory. */
export function prefillTiles(hd: number, G: number, maxShared: number) {
  const WG = 128;
  let BK = 32;
  let qv = 32;
  // f32 tiles: Q (QV·hd), K and V (BK rows of hd + 4 padding), scores (QV·BK), alpha (QV).
  const bytes = (QV: number, BK: number) => QV * hd * 4 + 2 * BK * (hd + 4) * 4 + QV * BK * 4 + QV * 4 + 64;
  while (bytes(qv, BK) > maxShared && (qv > G || BK > 8)) {
    if (BK > 16) BK /= 2;
    else if (qv > G) qv = Math.max(G, qv / 2);
    else BK /= 2;
  }
  const BQ = Math.max(1, Math.floor(qv / G));
  const QV = BQ * G;
  check(QV <= WG, "attentionPrefill", `G=${G} query heads per kv head is more than ${WG}`);
  return { WG, BK, BQ, OPL: Math.ceil((QV * hd) / WG) };
}
