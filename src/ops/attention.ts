/**
 * Host wrappers of the attention kernels: split-K decode (`attention_decode.wgsl` + `attention_combine.wgsl`)
 * for decode rows, and the tiled online-softmax kernels (`attention_prefill.wgsl`, or
 * `attention_prefill_quad.wgsl` with four query vectors per lane group) for prefill segments. Shape choices
 * come from the device's kernel profile (`decodeAttention`, `prefillAttention`).
 * @module
 */
import { ShapeError } from "../errors.ts";
import type { PrefillAttentionProfile } from "../gpu/profile.ts";
import { attentionPrefillMatrix, usesMatrixAttention } from "./attention_matrix.ts";
import { check, type OpContext, record } from "./context.ts";
import { kv8Block } from "./kv8.ts";
import { rope } from "./rope.ts";

/** The q8 cache's binding, define and block override (nothing for an act cache). */
function kv8(a: { kvScale?: GPUBuffer; hd: number }): {
  buffers: Record<string, GPUBuffer>;
  defines: Record<string, number>;
  overrides: Record<string, number>;
} {
  return a.kvScale
    ? { buffers: { kvs: a.kvScale }, defines: { KV8: 1 }, overrides: { QB: kv8Block(a.hd) } }
    : { buffers: {}, defines: {}, overrides: {} };
}

interface Common {
  rows: GPUBuffer;
  q: GPUBuffer;
  pages: GPUBuffer;
  /** This layer's KV pool (pages, 2, nkv, ps, hd) act, or q8 codes with `kvScale`. */
  kv: GPUBuffer;
  /** The q8 cache's scales (format: src/lab/ref/kv8.ts); decode with `rope` writes the new K/V quantized. */
  kvScale?: GPUBuffer;
  /** (R, nq·hd) f32 (the o_proj input). */
  out: GPUBuffer;
  row0: number;
  nq: number;
  nkv: number;
  hd: number;
  pageSize: number;
  maxPages: number;
  scale: number;
  /**
   * Sliding window (HF Gemma3 `sliding_window`): position p attends keys j with p − window < j ≤ p. 0 or
   * absent: full causal (the kernels compiled without the WINDOW define, as before).
   */
  window?: number;
}

/** The WINDOW define and its param (nothing for full causal attention). */
function slidingWindow(op: string, w: number | undefined): {
  defines: Record<string, number>;
  params: Record<string, number>;
} {
  // Below 2^31, so that j + window stays in u32 for any position the cache can hold.
  check(w === undefined || (Number.isInteger(w) && w >= 0 && w < 2 ** 31), op, `window ${w}`);
  return w ? { defines: { WINDOW: 1 }, params: { window: w } } : { defines: {}, params: {} };
}

/** RoPE inputs of the fused decode path (see rope.ts: same meaning). */
export interface DecodeRope {
  /** (R, (nq + 2·nkv)·hd) act, the fused QKV projection (replaces `q`). */
  qkv: GPUBuffer;
  invFreq: GPUBuffer;
  qNorm?: GPUBuffer;
  kNorm?: GPUBuffer;
  rot: number;
  eps: number;
  mscale: number;
}

export interface DecodeAttentionArgs extends Common {
  /**
   * RoPE inputs: q, K and V of the decode rows are not prepared yet. Short rows do it inside the kernel;
   * long rows (see the profile's `fusedRopeMaxKeys`) through rope.wgsl into `q` first. Without it, `q` holds
   * roped queries and the cache the new K/V.
   */
  rope?: DecodeRope;
  /** Decode rows row0 .. row0+D−1. */
  D: number;
  /** Scratch (R, nq, maxSplit, hd) f32 and (R, nq, maxSplit) vec2<f32>. */
  opart: GPUBuffer;
  ml: GPUBuffer;
  maxSplit: number;
}

/**
 * Attention of decode rows over the paged cache, split along the keys, then the splits combined. With
 * `window`, splits wholly before a row's window return at once and the combine skips them.
 */
export async function attentionDecode(ctx: OpContext, a: DecodeAttentionArgs): Promise<void> {
  const G = a.nq / a.nkv;
  check(Number.isInteger(G), "attentionDecode", `nq=${a.nq} is not a multiple of nkv=${a.nkv}`);
  check(
    a.hd <= 256 && a.hd % 8 === 0 && 128 % (a.hd / 8) === 0,
    "attentionDecode",
    `head_dim ${a.hd} (8·2^k up to 256)`,
  );
  const p = ctx.gpu.profile.decodeAttention;
  const split = p.keysPerSplit;
  check(
    split / a.pageSize <= 63,
    "attentionDecode",
    `page size ${a.pageSize}: a split spans at most 64 pages`,
  );
  const L = a.hd / 8;
  const info = ctx.gpu.info;
  // The subgroup merge assumes a fixed subgroup size covering whole key groups.
  const sg = info.subgroupMinSize === info.subgroupMaxSize ? info.subgroupMinSize : 0;
  const useSg = info.subgroups && sg >= L && sg <= 128 && 128 % sg === 0;
  const rp = a.rope;
  check(
    !rp || (rp.rot % 2 === 0 && rp.rot <= a.hd && !!rp.qNorm === !!rp.kNorm),
    "attentionDecode",
    `rot=${rp?.rot}, q_norm and k_norm together`,
  );
  const blocks = Math.ceil(G / 4); // four query heads per workgroup
  const NO_LIMIT = 0xffffffff;
  // Four keys per step (lib/decode_keys4.wgsl), with subgroups. It then prepares RoPE inside the
  // kernel at every length, and rows past `longRowKeys` take splits twice as long.
  const keys4 = p.fourKeysPerStep && useSg && (!!a.kvScale || info.f16);
  // The fused variant binds 8 storage buffers, plus q/k norms and the q8 scales: past the device's limit
  // (browsers: 10) every row takes rope.wgsl and the plain kernel.
  const fusedBuffers = 8 + (rp?.qNorm ? 2 : 0) + (a.kvScale ? 1 : 0);
  const canFuse = fusedBuffers <= info.maxStorageBuffers;
  const lim = rp && canFuse ? (keys4 ? NO_LIMIT : Math.min(p.fusedRopeMaxKeys, NO_LIMIT)) : 0;
  // A split's page list holds 64 pages: with small pages, long splits are left off.
  const long = keys4 && p.longRowKeys > 0 && (2 * split) / a.pageSize <= 63 ? p.longRowKeys : NO_LIMIT;
  // The scratch holds maxSplit splits (sized at load for the context window and the split then set): more
  // would drop keys silently, so a split set smaller after load is an error, not a clamp. Rows up to `long`
  // keys have at most ceil(min(maxKv, long) / split) splits, longer ones ceil(maxKv / 2·split).
  const splits = (maxKv: number) => {
    const n = Math.max(
      Math.ceil(Math.min(maxKv, long) / split),
      maxKv > long ? Math.ceil(maxKv / (2 * split)) : 0,
    );
    if (n > a.maxSplit) {
      throw new ShapeError(
        `attentionDecode: ${maxKv} keys need ${n} splits of ${split}; the scratch holds ${a.maxSplit}`,
      );
    }
    return n;
  };
  // Workgroup memory: merge slots (one per subgroup, or per key group without subgroups) of L·8 vec4s, plus
  // the fused variant's two head tables; a workgroup too big for it is halved.
  const fitWg = (wg: number) => {
    const bytes = (w: number) => (useSg ? w / sg : w / L) * (L * 8 + 2) * 16 + 2 * 5 * a.hd * 4 + w * 4 + 256;
    while (wg > 128 && bytes(wg) > info.maxWorkgroupStorage) wg /= 2;
    return wg;
  };
  const q8 = kv8(a);
  const win = slidingWindow("attentionDecode", a.window);
  const variant = async (
    fused: boolean,
    minLen: number,
    maxLen: number,
    z: (maxKv: number, minKv: number) => number,
  ) => {
    const buffers: Record<string, GPUBuffer> = {
      rows: a.rows,
      pages: a.pages,
      kv: a.kv,
      q: fused ? rp!.qkv : a.q,
      opart: a.opart,
      ml: a.ml,
      out: a.out,
      ...q8.buffers,
    };
    if (fused) {
      Object.assign(buffers, { inv_freq: rp!.invFreq }, rp!.qNorm ? { qn: rp!.qNorm, kn: rp!.kNorm } : {});
    }
    await record(ctx, {
      file: "attention_decode.wgsl",
      defines: {
        ...(useSg ? { LANE_SUBGROUP: 1 } : {}),
        ...(fused ? { ROPE: 1 } : {}),
        ...(fused && rp!.qNorm ? { QK_NORM: 1 } : {}),
        ...(keys4 ? { FOUR_KEYS_PER_STEP: 1 } : {}),
        KV_ACCESS: fused ? "read_write" : "read",
        ...q8.defines,
        ...win.defines,
      },
      overrides: {
        HD: a.hd,
        G,
        SPLIT: split,
        WG: fitWg(fused ? p.fusedRopeWorkgroupSize : p.workgroupSize),
        ...(useSg ? { SG: sg } : {}),
        ...q8.overrides,
      },
    }, {
      buffers,
      params: {
        row0: a.row0,
        nq: a.nq,
        nkv: a.nkv,
        ps: a.pageSize,
        max_pages: a.maxPages,
        max_split: a.maxSplit,
        scale: a.scale,
        min_len: minLen,
        max_len: maxLen,
        long_len: long,
        ...(fused ? { rot: rp!.rot, eps: rp!.eps, mscale: rp!.mscale } : {}),
        ...win.params,
      },
      grid: (s) => [a.D, a.nkv * blocks, z(s.maxKvLen, s.minKvLen ?? 0)],
    });
  };
  if (lim > 0) await variant(true, 0, lim, (m, n) => (n > lim ? 0 : splits(Math.min(m, lim))));
  if (lim < NO_LIMIT) {
    // Rows longer than `lim` (all rows without RoPE inputs): rope.wgsl, then the plain kernel.
    if (rp) {
      await rope(ctx, {
        ...rp,
        rows: a.rows,
        pages: a.pages,
        kv: a.kv,
        kvScale: a.kvScale,
        q: a.q,
        R: a.D,
        row0: a.row0,
        minLen: lim + 1,
        nq: a.nq,
        nkv: a.nkv,
        hd: a.hd,
        pageSize: a.pageSize,
        maxPages: a.maxPages,
        when: (s) => s.maxKvLen > lim,
      });
    }
    await variant(false, lim + 1, NO_LIMIT, (m) => (m > lim ? splits(m) : 0));
  }
  const combineWg = Math.max(Math.min(p.combineWorkgroupSize, info.maxInvocations), a.hd / 4);
  await record(
    ctx,
    {
      file: "attention_combine.wgsl",
      defines: win.defines,
      overrides: { HD: a.hd, SPLIT: split, WG: combineWg },
    },
    {
      buffers: { rows: a.rows, opart: a.opart, ml: a.ml, out: a.out },
      params: { row0: a.row0, nq: a.nq, max_split: a.maxSplit, long_len: long, ...win.params },
      // Not needed while every row fits in one split (attention_decode then writes `out` itself).
      grid: (s) => (s.maxKvLen > split ? [a.D, a.nq, 1] : [0, 0, 0]),
    },
  );
}

export interface PrefillAttentionArgs extends Common {
  /** Segment rows row0 .. row0+S−1: one sequence, consecutive positions. */
  S: number;
}

/**
 * Causal attention of one prefill segment (with `window`: key tiles wholly before the first row's window
 * are skipped, keys outside each row's masked): on matrix units where the adapter has them
 * (attention_matrix.ts), else the quad kernel (`attention_prefill_quad.wgsl`: four query
 * vectors per group of hd/16 lanes) for head dims 128 and 64 on f16 P·V with subgroups, else the two-vector
 * kernel (`attention_prefill.wgsl`). Tiles are loaded once per key tile into workgroup memory: the f16
 * cache's words as they are, the q8 cache's K codes as they are under integer q·k, everything else as f32.
 */
export async function attentionPrefill(ctx: OpContext, a: PrefillAttentionArgs): Promise<void> {
  const G = a.nq / a.nkv;
  check(Number.isInteger(G), "attentionPrefill", `nq=${a.nq} is not a multiple of nkv=${a.nkv}`);
  check(
    a.hd % 8 === 0 && a.hd <= 256 && 256 % (a.hd / 8) === 0,
    "attentionPrefill",
    `head_dim ${a.hd} (8·2^k up to 256)`,
  );
  const q8 = kv8(a);
  const win = slidingWindow("attentionPrefill", a.window);
  const params = {
    row0: a.row0,
    S: a.S,
    nq: a.nq,
    nkv: a.nkv,
    ps: a.pageSize,
    max_pages: a.maxPages,
    scale: a.scale,
    ...win.params,
  };
  if (usesMatrixAttention(ctx.gpu, a)) {
    return attentionPrefillMatrix(ctx, a, { ...q8, defines: { ...q8.defines, ...win.defines }, params });
  }
  const info = ctx.gpu.info;
  const p = ctx.gpu.profile.prefillAttention;
  // The f16 cache's tiles stay f16 words; the q8 cache's K tile stays codes for integer q·k (32 dims per
  // lane: one scale block each), or both are dequantized to f32.
  const f16Tiles = info.f16 && !a.kvScale;
  const int8QK = p.int8QK && !!a.kvScale && a.hd % 32 === 0;
  // f16 P·V (the V tile as f16 values, q8: rounded) summed per eight keys wherever the K tile is not f32.
  const f16PV = info.f16 && (int8QK || f16Tiles);
  const sg = info.subgroupMinSize === info.subgroupMaxSize ? info.subgroupMinSize : 0;
  // The quad kernel needs subgroups of whole hd/16-lane groups and tiles of at least eight keys.
  const tile = int8QK ? (f16PV ? "qk8h" : "qk8") : f16Tiles ? "packed" : "f32";
  const qL = a.hd / 16;
  let quad = p.quad && f16PV && (a.hd === 128 || a.hd === 64) && info.subgroups && sg >= qL && sg % qL === 0;
  let t = prefillTiles(p, a.hd, G, info.maxWorkgroupStorage, tile, quad);
  if (quad && t.BK < 8) [quad, t] = [false, prefillTiles(p, a.hd, G, info.maxWorkgroupStorage, tile, false)];
  // (Unreachable with WebGPU's least 16 KiB of workgroup memory for head dims up to 256.)
  check(
    !f16PV || t.BK >= 8,
    "attentionPrefill",
    `head_dim ${a.hd}: f16 P·V needs key tiles of eight keys (${t.BK} fit)`,
  );
  const useSg = info.subgroups && sg >= t.L;
  // The next tile's units in registers (f16: K and V 8 dims each; q8: K 16 codes, V 8 codes) while this one
  // is computed, within the registers lib/prefill_tile.wgsl names (and one K scale per lane).
  const units = (n: number) => Math.ceil(n / t.WG);
  const prefetch = f16Tiles
    ? units((t.BK * a.hd) / 8) <= 4
    : f16PV && units((t.BK * a.hd) / 16) <= 2 && units((t.BK * a.hd) / 8) <= 4 && (t.BK * a.hd) / 32 <= t.WG;
  await record(ctx, {
    file: quad ? "attention_prefill_quad.wgsl" : "attention_prefill.wgsl",
    defines: {
      ...(useSg ? { LANE_SUBGROUP: 1 } : {}),
      LANE_VEC4S: t.NV4,
      ...(t.NV4 >= 4 ? { LANE_16_DIMS: 1 } : {}),
      ...(t.NV4 >= 8 ? { LANE_32_DIMS: 1 } : {}),
      ...(f16Tiles ? { F16_TILES: 1 } : {}),
      ...(f16PV ? { F16_PV: 1 } : {}),
      ...(int8QK ? { INT8_QK: 1, K_CODE_VEC4S: a.hd / 16, K_SCALES: a.hd / 32 } : {}),
      ...q8.defines,
      ...win.defines,
      ...(quad
        ? { ...(a.hd === 128 ? { HEAD_DIM_128: 1 } : {}), ...(f16Tiles && p.f16QK ? { F16_QK: 1 } : {}) }
        : {}),
      ...(prefetch
        ? {
          PREFETCH_TILES: 1,
          ...(f16Tiles
            ? { PREFETCH_UNITS: units((t.BK * a.hd) / 8) }
            : { PREFETCH_UNITS: units((t.BK * a.hd) / 16), PREFETCH_V_UNITS: units((t.BK * a.hd) / 8) }),
        }
        : {}),
    },
    overrides: { HD: a.hd, G, BQ: t.BQ, BK: t.BK, WG: t.WG, ...q8.overrides },
  }, {
    buffers: { rows: a.rows, q: a.q, pages: a.pages, kv: a.kv, out: a.out, ...q8.buffers },
    params,
    grid: [Math.ceil(a.S / t.BQ), a.nkv, 1],
  });
}

/**
 * Tile shape of prefill attention: 256 lanes in groups of L = hd/(4·NV4) (two query vectors per group, up
 * to 32 dims per lane; quad: four, 16 dims), BQ positions × G heads per workgroup, and the largest key tile
 * (up to the profile's keys per tile) whose K and V fit in workgroup memory: f32 rows padded by one vec4 per
 * 8, f16 rows padded by one vec4 per lane (quad: unpadded, swizzled), or K codes and their scales. A query
 * vector's arithmetic depends on L only, never on BQ or BK (keys are grouped from multiples of eight in every
 * tile, and masked keys leave the online softmax bit-for-bit unchanged), so a row's bits do not depend on S.
 */
function prefillTiles(
  p: PrefillAttentionProfile,
  hd: number,
  G: number,
  maxShared: number,
  tile: "f32" | "packed" | "qk8" | "qk8h",
  quad: boolean,
) {
  const NV4 = quad ? 4 : Math.min(8, hd / 4);
  const L = hd / (4 * NV4);
  const per = quad ? 4 : 2;
  const WG = 256;
  const QV = WG / L;
  check(
    G <= per * QV,
    "attentionPrefill",
    `${G} query heads per kv head exceed ${per * QV} query vectors per workgroup (head_dim ${hd})`,
  );
  const f32Row = (hd / 4 + Math.floor(hd / 32)) * 16;
  const packedRow = quad ? (hd / 8) * 16 : (hd / 8 + hd / 8 / (NV4 / 2)) * 16;
  const k8Row = hd + (hd / 32) * 4;
  const keyBytes = tile === "packed"
    ? 2 * packedRow
    : tile === "qk8"
    ? k8Row + f32Row
    : tile === "qk8h"
    ? k8Row + packedRow
    : 2 * f32Row;
  // Sized for the largest workgroup (its reduction slots without subgroups).
  let BK = quad ? p.keysPerTileQuad : tile === "qk8" || tile === "qk8h" ? p.keysPerTileInt8QK : p.keysPerTile;
  while (BK > 4 && BK * keyBytes + 256 * 16 > maxShared) BK /= 2;
  return { WG, L, NV4, BK, BQ: Math.floor((per * QV) / G) };
}
