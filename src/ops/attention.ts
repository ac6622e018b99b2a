/**
 * Host wrappers of the attention kernels: split-K decode (`attention_decode.wgsl` + `attention_combine.wgsl`)
 * for decode rows, and the tiled online-softmax kernel (`attention_prefill.wgsl`) for prefill segments.
 * @module
 */
import { ShapeError } from "../errors.ts";
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

/**
 * Decode attention shape: keys per split (a row of length L uses ceil(L / split) workgroups per kv head),
 * workgroup size (key rows in flight = wg / (hd/8)), and `ropeMaxKv`: with RoPE inputs, rows with at most
 * this many keys prepare their q and new K/V inside the kernel (one dispatch fewer), with their own
 * workgroup size `ropeWg` (short rows have few workgroups); longer rows take rope.wgsl first,
 * because each of their many split workgroups would repeat the preparation (0: never); `combineWg`: lanes
 * of the combine's workgroups (one per row and head; hd/4 lanes per group of splits; H200 16k: 512 lanes +2.5%).
 * `keys4` (q8 and f16 caches, with subgroups): four keys per step from raw words (lib/decode_keys4.wgsl),
 * which prepares RoPE in the kernel at every length (`ropeMaxKv` is then unused), and `longKv`: rows with
 * more keys take splits of 2·split keys (0: never). H200, f16 cache, 4B: 16k 276.6 → 303.9, 4k 350.6 →
 * 363.5 tok/s (bench/NOTES.md #53).
 * Defaults from H200 A/B runs (bench/NOTES.md).
 */
const decodeTuning: {
  split: number;
  wg: number;
  ropeMaxKv: number;
  ropeWg: number;
  combineWg: number;
  keys4: boolean;
  longKv: number;
  probe?: "kvrw";
} = {
  split: 256,
  wg: 128,
  combineWg: 512,
  ropeMaxKv: 4608,
  ropeWg: 128,
  keys4: true,
  longKv: 8192,
};

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
   * long rows (see `ropeMaxKv`) through rope.wgsl into `q` first. Without it, `q` holds roped queries
   * and the cache the new K/V.
   */
  rope?: DecodeRope;
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
  const rp = a.rope;
  check(!rp || (rp.rot % 2 === 0 && rp.rot <= a.hd && !!rp.qNorm === !!rp.kNorm), "attentionDecode", `rot=${rp?.rot}, q_norm and k_norm together`);
  const blocks = Math.ceil(G / 4); // four query heads per workgroup
  const NO_LIMIT = 0xffffffff;
  // Four keys per step (lib/decode_keys4.wgsl), with subgroups. It then prepares RoPE inside the
  // kernel at every length, and rows past `longKv` take splits twice as long.
  const keys4 = decodeTuning.keys4 && useSg && (!!a.kvScale || info.f16);
  // The fused variant binds 8 storage buffers, plus q/k norms and the q8 scales: past the device's limit
  // (browsers: 10) every row takes rope.wgsl and the plain kernel.
  const fusedBuffers = 8 + (rp?.qNorm ? 2 : 0) + (a.kvScale ? 1 : 0);
  const canFuse = fusedBuffers <= info.maxStorageBuffers;
  const lim = rp && canFuse ? (keys4 ? NO_LIMIT : Math.min(decodeTuning.ropeMaxKv, NO_LIMIT)) : 0;
  const split = decodeTuning.split;
  // A split's page list holds 64 pages: with small pages, long splits are left off.
  const long = keys4 && decodeTuning.longKv > 0 && (2 * split) / a.pageSize <= 63 ? decodeTuning.longKv : NO_LIMIT;
  // The scratch holds maxSplit splits (sized at load for the context window and the split then set): more
  // would drop keys silently, so a split set smaller after load is an error, not a clamp. Rows up to `long`
  // keys have at most ceil(min(maxKv, long) / split) splits, longer ones ceil(maxKv / 2·split).
  const splits = (maxKv: number) => {
    const n = Math.max(Math.ceil(Math.min(maxKv, long) / split), maxKv > long ? Math.ceil(maxKv / (2 * split)) : 0);
    if (n > a.maxSplit) throw new ShapeError(`attentionDecode: ${maxKv} keys need ${n} splits of ${split}; the scratch holds ${a.maxSplit}`);
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
  const variant = async (fused: boolean, minLen: number, maxLen: number, z: (maxKv: number, minKv: number) => number) => {
    const buffers: Record<string, GPUBuffer> = {
      rows: a.rows, pages: a.pages, kv: a.kv, q: fused ? rp!.qkv : a.q, opart: a.opart, ml: a.ml, out: a.out, ...q8.buffers,
    };
    if (fused) Object.assign(buffers, { inv_freq: rp!.invFreq }, rp!.qNorm ? { qn: rp!.qNorm, kn: rp!.kNorm } : {});
    await record(ctx, {
      file: "attention_decode.wgsl",
      defines: {
        ...(useSg ? { LANE_SUBGROUP: 1 } : {}), ...(fused ? { ROPE: 1 } : {}), ...(fused && rp!.qNorm ? { QK_NORM: 1 } : {}),
        ...(keys4 ? { KEYS4: 1 } : {}),
        KV_ACCESS: fused || decodeTuning.probe === "kvrw" ? "read_write" : "read", ...q8.defines,
      },
      overrides: {
        HD: a.hd, G, SPLIT: split, WG: fitWg(fused ? decodeTuning.ropeWg : decodeTuning.wg), ...(useSg ? { SG: sg } : {}), ...q8.overrides,
      },
    }, {
      buffers,
      params: {
        row0: a.row0, nq: a.nq, nkv: a.nkv, ps: a.pageSize, max_pages: a.maxPages, max_split: a.maxSplit, scale: a.scale,
        min_len: minLen, max_len: maxLen, long_len: long, ...(fused ? { rot: rp!.rot, eps: rp!.eps, mscale: rp!.mscale } : {}),
      },
      grid: (s) => [a.D, a.nkv * blocks, z(s.maxKvLen, s.minKvLen ?? 0)],
    });
  };
  if (lim > 0) await variant(true, 0, lim, (m, n) => (n > lim ? 0 : splits(Math.min(m, lim))));
  if (lim < NO_LIMIT) {
    // Rows longer than `lim` (all rows without RoPE inputs): rope.wgsl, then the plain kernel.
    if (rp) {
      await rope(ctx, {
        ...rp, rows: a.rows, pages: a.pages, kv: a.kv, kvScale: a.kvScale, q: a.q, R: a.D, row0: a.row0, minLen: lim + 1, nq: a.nq, nkv: a.nkv,
        hd: a.hd, pageSize: a.pageSize, maxPages: a.maxPages, when: (s) => s.maxKvLen > lim,
      });
    }
    await variant(false, lim + 1, NO_LIMIT, (m) => (m > lim ? splits(m) : 0));
  }
  await record(ctx, { file: "attention_combine.wgsl", overrides: { HD: a.hd, SPLIT: decodeTuning.split, WG: Math.max(Math.min(decodeTuning.combineWg, ctx.gpu.info.maxInvocations), a.hd / 4) } }, {
    buffers: { rows: a.rows, opart: a.opart, ml: a.ml, out: a.out },
    params: { row0: a.row0, nq: a.nq, max_split: a.maxSplit, long_len: long },
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
  const info = ctx.gpu.info;
  // The q8 cache's tiles are dequantized to f32 (PACKED is for f16 caches), or with `qk8` its K tile stays
  // codes for integer q·k (32 dims per lane: one scale block each).
  const packed = prefillTuning.packed && info.f16 && !a.kvScale;
  const qk8 = prefillTuning.qk8 && !!a.kvScale && a.hd % 32 === 0;
  // HPV (f16 cache, or q8 with qk8): the V tile as f16 values (q8: rounded), P·V summed in f16 per four
  // keys; four-key steps only.
  const hpv = prefillTuning.hpv && info.f16 && prefillTuning.keys4 && (qk8 || packed);
  const vpk = packed || hpv;
  const q8 = kv8(a);
  const sg = info.subgroupMinSize === info.subgroupMaxSize ? info.subgroupMinSize : 0;
  // QUAD (lib/prefill_quad.wgsl; HPV, head dim 128 or 64, subgroups of whole hd/16-lane groups): four query
  // vectors per lane group, eight keys per step (tiles of at least eight keys, or the two-vector kernel).
  const tile = qk8 ? (vpk ? "qk8h" : "qk8") : packed ? "packed" : "f32";
  const qL = a.hd / 16;
  let quad = prefillTuning.quad && hpv && prefillTuning.keys8 && (a.hd === 128 || a.hd === 64) && info.subgroups && sg >= qL && sg % qL === 0;
  let t = prefillTiles(a.hd, G, info.maxWorkgroupStorage, a.S, a.nkv, tile, quad);
  if (quad && t.BK < 8) [quad, t] = [false, prefillTiles(a.hd, G, info.maxWorkgroupStorage, a.S, a.nkv, tile, false)];
  const useSg = info.subgroups && sg >= t.L;
  // PKEYS8 (with HPV): eight keys per step, P·V summed in f16 per eight; tiles of at least eight keys.
  const keys8 = prefillTuning.keys8 && hpv && t.BK >= 8;
  // PF: units of the next tile per lane (f16: K and V 8 dims each; q8: K 16 codes, V 8 codes) within the
  // registers lib/prefill_tile.wgsl names (and one K scale per lane).
  const units = (n: number) => Math.ceil(n / t.WG);
  const pf = prefillTuning.pf && (packed ? units((t.BK * a.hd) / 8) <= 4 : hpv && units((t.BK * a.hd) / 16) <= 2 &&
    units((t.BK * a.hd) / 8) <= 4 && (t.BK * a.hd) / 32 <= t.WG);
  await record(ctx, {
    file: "attention_prefill.wgsl",
    defines: {
      ...(useSg ? { LANE_SUBGROUP: 1 } : {}), NV4: t.NV4, ...(t.NV4 >= 4 ? { NV4GE4: 1 } : {}), ...(t.NV4 >= 8 ? { NV4GE8: 1 } : {}),
      ...(packed ? { PACKED: 1 } : {}), ...(vpk ? { VPK: 1 } : {}), ...(hpv ? { HPV: 1 } : {}),
      ...(qk8 ? { QK8: 1, H16: a.hd / 16, NB: a.hd / 32 } : {}), ...q8.defines,
      ...(prefillTuning.keys4 ? { PKEYS4: 1 } : {}), ...(keys8 ? { PKEYS8: 1 } : {}),
      ...(quad ? { QUAD: 1, ...(a.hd === 128 ? { KH: 1 } : {}), ...(prefillTuning.qh ? { QH: 1 } : {}), ...(qk8 && prefillTuning.qi ? { QI: 1 } : {}),
        ...(packed && prefillTuning.hqk ? { HQK: 1 } : {}) } : {}),
      ...(pf ? { PF: 1, ...(packed ? { NPF: units((t.BK * a.hd) / 8) } : { NPF: units((t.BK * a.hd) / 16), NPV: units((t.BK * a.hd) / 8) }) } : {}),
    },
    overrides: { HD: a.hd, G, BQ: t.BQ, BK: t.BK, WG: t.WG, ...q8.overrides },
  }, {
    buffers: { rows: a.rows, q: a.q, pages: a.pages, kv: a.kv, out: a.out, ...q8.buffers },
    params: {
      row0: a.row0, S: a.S, nq: a.nq, nkv: a.nkv, ps: a.pageSize, max_pages: a.maxPages, scale: a.scale,
    },
    grid: [Math.ceil(a.S / t.BQ), a.nkv, 1],
  });
}

/**
 * Prefill attention: `minGrid`, the least number of workgroups a segment's grid should have; short segments
 * take smaller workgroups until their grid reaches it. Off (0): on the H200 a 512-token prompt's 128
 * workgroups of 256 lanes beat 256 of 128 (attention 9.9 vs 12.2 ms; bench/NOTES.md #34). `packed`: an f16
 * cache's K/V tiles stay f16 in workgroup memory (PACKED; same bits), which lets `bk`, the keys per tile at
 * most, reach 64 (H200: packed with 32-key tiles −5%, with 64-key tiles +0–2%; #48). `qk8`: a q8 cache's
 * q·k on integer dot products (lib/prefill_qk8.wgsl; head dims that are multiples of 32; H200 4B prompt of
 * 16k: 2,499 → 2,647 tok/s, 4k +3%; bundled model's NLL 3.8296 → 3.8300; #54). `keys4`: four keys per
 * online-softmax step (lib/prefill_keys4.wgsl). `pf`: the next K/V tile is loaded into registers while this
 * one is computed (lib/prefill_tile.wgsl; f16 cache, and q8 with `hpv`; same bits; H200, one 4B layer of 2048
 * rows at depth 12k: 22.3 → 20.3 ms with q·k as fused multiply-adds, q8 17.2 → 16.2 ms; bench/NOTES.md
 * #57–#59). `hpv`: the V tile as f16 values (q8 with qk8: rounded) and P·V summed in f16 per four keys
 * (q8: 18.4 → 17.2 ms); since the tile is read 16 bytes at a time it gains for the f16 cache too (20.3 →
 * 19.0 ms; #61–#63). `bkQ8`: the q8 cache's keys per tile at most (32: 14.2 ms against 15.5 with 64; #63).
 * `keys8` (with `hpv`): eight keys per step (lib/prefill_keys8.wgsl), the f16 P·V partial summing eight
 * keys before it meets the f32 state (f16 19.0 → 16.6 ms, q8 14.2 → 12.7 ms; #65; the loops stay inline in
 * the kernel: as functions they ran 8–10% slower). `quad` (with `hpv` and `keys8`, head dim 128 or 64,
 * subgroups): four query vectors per group of hd/16 lanes, 16 dims each, so each 16-byte tile read feeds four vectors
 * (lib/prefill_quad.wgsl), its partial scores summed by a reduce-scatter and the weights gathered back;
 * `bkQuad` its keys per tile (both caches), `qh` the weights gathered as f16, `qi` (q8) the first round of
 * the sums in integers. H200, one 4B layer of 2048 rows at depth 12k: f16 16.6 → 13.5 ms, q8 12.7 → 10.1
 * ms (#67). `hqk` (quad, f16 cache): q·k on f16 fused multiply-adds, chains of eight products per vector
 * (at depth 16k: 17.4 → 15.8 ms per 4B layer, head dim 64 4.39 → 4.01; #72). Scores then carry f16 rounding (the
 * kernel check's reference sums them alike; the bundled model's mean NLL: #72).
 */
const prefillTuning = { minGrid: 0, packed: true, bk: 64, bkQ8: 32, qk8: true, keys4: true, hpv: true, pf: true, keys8: true, quad: true, bkQuad: 64, qh: true, qi: true, hqk: true };

/** Overrides the prefill attention shape (benchmark sweeps, tests). Returns the old one. */
export function setPrefillAttentionTuning(t: Partial<typeof prefillTuning>): typeof prefillTuning {
  const prev = { ...prefillTuning };
  Object.assign(prefillTuning, t);
  return prev;
}

/**
 * Tile shape of prefill attention: WG lanes (256, or 128 / 64 while a segment of S rows would have fewer
 * than `minGrid` workgroups) in groups of L = hd/(4·NV4) (two query vectors per group, up to 32 dims per
 * lane), BQ positions × G heads per workgroup, and the largest key tile (up to `bk` keys) whose K and V fit
 * in workgroup memory: f32 rows padded by one vec4 per 8, or (packed) f16 rows padded by one vec4 per lane.
 * A query vector's arithmetic depends on L only, never on WG, BQ or BK (keys are paired from even positions
 * in every tile, and masked keys leave the online softmax bit-for-bit unchanged), so a row's bits do not
 * depend on S.
 */
export function prefillTiles(hd: number, G: number, maxShared: number, S = Infinity, nkv = 1, tile: "f32" | "packed" | "qk8" | "qk8h" = "f32", quad = false) {
  // QUAD: four vectors per group of hd/16 lanes (16 dims each); otherwise two per group, up to 32 dims per lane.
  const NV4 = quad ? 4 : Math.min(8, hd / 4);
  const L = hd / (4 * NV4);
  const per = quad ? 4 : 2;
  let WG = 256;
  while (WG > 64 && per * (WG / 2 / L) >= G && Math.ceil(S / Math.floor((per * WG) / L / G)) * nkv < prefillTuning.minGrid) WG /= 2;
  const QV = WG / L;
  check(G <= per * QV, "attentionPrefill", `${G} query heads per kv head exceed ${per * QV} query vectors per workgroup (head_dim ${hd})`);
  // Bytes per key of the K and V tiles: f32 rows padded by one vec4 per 8; packed f16 rows padded by one vec4
  // per lane (QUAD: unpadded, swizzled); qk8: K codes + block scales, V f32.
  const f32Row = (hd / 4 + Math.floor(hd / 32)) * 16;
  const packedRow = quad ? (hd / 8) * 16 : (hd / 8 + hd / 8 / (NV4 / 2)) * 16;
  const k8Row = hd + (hd / 32) * 4;
  const keyBytes = tile === "packed" ? 2 * packedRow : tile === "qk8" ? k8Row + f32Row : tile === "qk8h" ? k8Row + packedRow : 2 * f32Row;
  // Sized for the largest workgroup (its reduction slots without subgroups).
  let BK = quad ? prefillTuning.bkQuad : tile === "qk8" || tile === "qk8h" ? prefillTuning.bkQ8 : prefillTuning.bk;
  while (BK > 4 && BK * keyBytes + 256 * 16 > maxShared) BK /= 2;
  return { WG, L, NV4, BK, BQ: Math.floor((per * QV) / G) };
}
