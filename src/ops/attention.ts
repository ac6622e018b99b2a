/**
 * Host wrappers of the attention kernels: split-K decode (`attention_decode.wgsl` + `attention_combine.wgsl`)
 * for decode rows, and the tiled online-softmax kernel (`attention_prefill.wgsl`) for prefill segments.
 * @module
 */
import { check, type OpContext, record } from "./context.ts";

/**
 * Decode attention shape: keys per split (a row of length L uses ceil(L / split) workgroups per kv head)
 * and workgroup size (key rows in flight = wg / (hd/8)). Defaults from H200 sweeps (bench/NOTES.md).
 */
const decodeTuning = { split: 256, wg: 128 };

/** Keys per split of decode attention (sizes the split scratch buffers). */
export function decodeSplit(): number {
  return decodeTuning.split;
}

/** Overrides the decode attention shape (benchmark sweeps; set before buffers are sized). Returns the old one. */
export function setDecodeAttentionTuning(t: Partial<typeof decodeTuning>): typeof decodeTuning {
  const prev = { ...decodeTuning };
  Object.assign(decodeTuning, t);
  return prev;
}

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
  check(Number.isInteger(G), "attentionDecode", `nq=${a.nq} is not a multiple of nkv=${a.nkv}`);
  check(a.hd <= 256 && a.hd % 8 === 0 && 128 % (a.hd / 8) === 0, "attentionDecode", `head_dim ${a.hd} (8·2^k up to 256)`);
  check(decodeTuning.split / a.pageSize <= 63, "attentionDecode", `page size ${a.pageSize}: a split spans at most 64 pages`);
  const L = a.hd / 8;
  const info = ctx.gpu.info;
  // The subgroup merge assumes a fixed subgroup size covering whole key groups.
  const sg = info.subgroupMinSize === info.subgroupMaxSize ? info.subgroupMinSize : 0;
  const useSg = info.subgroups && sg >= L && sg <= 128 && 128 % sg === 0;
  const common = { rows: a.rows, pages: a.pages, kv: a.kv };
  const blocks = Math.ceil(G / 4); // four query heads per workgroup
  await record(ctx, {
    file: "attention_decode.wgsl",
    defines: useSg ? { LANE_SUBGROUP: 1 } : {},
    overrides: { HD: a.hd, G, SPLIT: decodeTuning.split, WG: decodeTuning.wg, ...(useSg ? { SG: sg } : {}) },
  }, {
    buffers: { ...common, q: a.q, opart: a.opart, ml: a.ml, out: a.out },
    params: {
      row0: a.row0, nq: a.nq, nkv: a.nkv, ps: a.pageSize, max_pages: a.maxPages, max_split: a.maxSplit, scale: a.scale,
    },
    grid: (s) => [a.D, a.nkv * blocks, Math.min(a.maxSplit, Math.ceil(s.maxKvLen / decodeTuning.split))],
  });
  await record(ctx, { file: "attention_combine.wgsl", overrides: { HD: a.hd, SPLIT: decodeTuning.split } }, {
    buffers: { rows: a.rows, opart: a.opart, ml: a.ml, out: a.out },
    params: { row0: a.row0, nq: a.nq, max_split: a.maxSplit },
    // Not needed while every row fits in one split (attention_decode then writes `out` itself).
    grid: (s) => (s.maxKvLen > decodeTuning.split ? [a.D, a.nq, 1] : [0, 0, 0]),
  });
}

export interface PrefillAttentionArgs extends Common {
  /** Segment rows row0 .. row0+S−1: one sequence, consecutive positions. */
  S: number;
}

export async function attentionPrefill(ctx: OpContext, a: PrefillAttentionArgs): Promise<void> {
  const G = a.nq / a.nkv;
  check(Number.isInteger(G), "attentionPrefill", `nq=${a.nq} is not a multiple of nkv=${a.nkv}`);
  check(a.hd % 8 === 0 && a.hd <= 256 && 256 % (a.hd / 8) === 0, "attentionPrefill", `head_dim ${a.hd} (8·2^k up to 256)`);
  const t = prefillTiles(a.hd, G, ctx.gpu.info.maxWorkgroupStorage);
  const info = ctx.gpu.info;
  const sg = info.subgroupMinSize === info.subgroupMaxSize ? info.subgroupMinSize : 0;
  const useSg = info.subgroups && sg >= t.L;
  await record(ctx, {
    file: "attention_prefill.wgsl",
    defines: { ...(useSg ? { LANE_SUBGROUP: 1 } : {}), NV4: t.NV4, ...(t.NV4 >= 4 ? { NV4GE4: 1 } : {}), ...(t.NV4 >= 8 ? { NV4GE8: 1 } : {}) },
    overrides: { HD: a.hd, G, BQ: t.BQ, BK: t.BK, WG: t.WG },
  }, {
    buffers: { rows: a.rows, q: a.q, pages: a.pages, kv: a.kv, out: a.out },
    params: {
      row0: a.row0, S: a.S, nq: a.nq, nkv: a.nkv, ps: a.pageSize, max_pages: a.maxPages, scale: a.scale,
    },
    grid: [Math.ceil(a.S / t.BQ), a.nkv, 1],
  });
}

/**
 * Tile shape of prefill attention: 256 lanes in groups of L = hd/(4·NV4) (two query vectors per group, up to
 * 32 dims per lane), BQ positions × G heads per workgroup, and the largest key tile whose f32 K and V
 * (rows padded by one vec4 per 8) fit in workgroup memory.
 */
export function prefillTiles(hd: number, G: number, maxShared: number) {
  const WG = 256;
  const NV4 = Math.min(8, hd / 4);
  const L = hd / (4 * NV4);
  const QV = WG / L;
  check(G <= 2 * QV, "attentionPrefill", `${G} query heads per kv head exceed ${2 * QV} query vectors per workgroup (head_dim ${hd})`);
  const rowBytes = (hd / 4 + Math.floor(hd / 32)) * 16;
  let BK = 32;
  while (BK > 4 && 2 * BK * rowBytes + WG * 16 > maxShared) BK /= 2;
  return { WG, L, NV4, BK, BQ: Math.floor((2 * QV) / G) };
}
