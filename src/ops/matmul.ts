/**
 * Host wrapper of the matmul family: `matmul_vec.wgsl` for decode-like rows (weights streamed once for all
 * rows) and `matmul_tiled.wgsl` for prefill chunks. The caller picks the mode by row kind, not by count, so
 * a row's result never depends on what else is in the batch.
 * @module
 */
import { grid1d } from "../gpu/kernel.ts";
import type { Gpu } from "../gpu/device.ts";
import { check, type OpContext, record } from "./context.ts";
import { formatVariant, type Linear } from "./linear.ts";

export interface MatmulArgs {
  /** Activations (rows, K), act dtype. */
  x: GPUBuffer;
  w: Linear;
  /**
   * Output (rows, ldy): act for "act", f32 for "f32" and "add" (y += x·Wᵀ, the residual add); "swiglu"
   * (vector mode, 4-bit, W = [gate | up]): y f32 (rows, N/2) = silu(gate)·up.
   */
  y: GPUBuffer;
  M: number;
  out: "act" | "f32" | "add" | "swiglu";
  mode: "vec" | "tiled";
  /** First row of x and y (default 0). */
  row0?: number;
  /** Row stride of y in elements (default N). */
  ldy?: number;
  /** Column of y where this weight's output starts (default 0): several weights can fill one buffer. */
  nOff?: number;
  /**
   * Vector mode only: x is the residual and each row is RMS-normalised (· weight) inside the x loads, so
   * decode rows need no separate norm dispatch.
   */
  norm?: { weight: GPUBuffer; eps: number };
  /**
   * Tiled mode: scratch for split-K partials, sized for `rows` rows (the step's capacity, never the
   * step's M: whether a weight splits must not depend on M). See `splitsFor`.
   */
  splitK?: { buffer: GPUBuffer; rows: number };
  /** Tiled mode: keep x in f32 even where int8 x would be taken (logits read in full: tests, eval). */
  f32x?: boolean;
}

/** Kernel shape choices; the defaults come from sweeps on real GPUs (bench/NOTES.md). */
export interface MatmulTuning {
  /**
   * Vector kernel: lanes per team (0 = pick from K), Q4 chunks per lane when T is picked, Q4 words per
   * chunk (1, 2, 4), Q4 chunks loaded ahead (PF 1 or 2), least workgroup size, columns per team (non-Q4; Q4 teams take 4), magic Q4 dequant;
   * `probe` (kernel sweeps only, wrong results): "nomath" drops the Q4 math, leaving the memory side;
   * "noscale" keeps the math but loads no scales or biases; "wonly" does neither (weight loads alone).
   */
  vec: { T: number; U: number; V: number; PF: number; WG: number; R: number; magic: boolean; probe?: "nomath" | "noscale" | "wonly" };
  /**
   * 4-bit decode matmuls with int8 x (`lib/q4x8.wgsl`): on, the workgroup size (lanes; each workgroup
   * quantizes x once for its 4·WG/T columns), and the least N·K that takes it (below, the prologue's
   * latency costs more than the faster dot products save: the bundled 19M model decodes 14% slower);
   * `wideWG` replaces WG for N ≥ wideN: wide matrices have workgroups enough with smaller ones (H200 A/B: +4%).
   * `PF` 2 requests two chunks of weights before the prologue instead of one (H200: −6%, so 1); `maxK` leaves
   * narrow matrices (N < wideN) with rows longer than it to the f32-x kernel: 4B down_proj's 9,728-value
   * prologue in 80 workgroups costs more than it saves (+1.5%), while 8B's (N 4096, K 12,288) gains 3%.
   */
  x8: { on: boolean; WG: number; minWeights: number; wideWG: number; wideN: number; PF: number; maxK: number };
  /**
   * Tiled kernel: rows per lane, 4 or 8 (tile 16·TM × 64); wide: 128-column tiles (needs TM 8) from N ≥ wideN
   * (also for the int8-x kernel, whose narrow tiles are 64 × 64);
   * x8: 4-bit weights of ≥ x8.minWeights values on int8 x and integer dot products (`matmul_tiled_x8.wgsl`;
   * H200: 2.2× the f32 GEMM, prefill of 512 tokens 2,159 → 4,175 tok/s), 128 columns wide from N ≥ wideN or
   * while that grid has ≥ x8MinGrid workgroups, else 64 (H200 at 512 rows: o_proj 379 → 313 µs); kt2: its
   * narrow tiles stage two 32-value sub-tiles per barrier pair (KT2; o_proj 313 → 296 µs); splitK: narrow
   * matrices (N < wideN) on that kernel sum K in this many parts, then matmul_splitk.wgsl adds them, in
   * engines whose steps hold at most splitKMaxRows rows (the scratch grows with them; needs
   * `MatmulArgs.splitK`). H200, 512-token prompt: +5.6% in 512- and in 2048-row engines; 4k and 16k prompts
   * ±0.2% in 2048-row ones since the tiles below (−0.8% before them).
   * x64: that kernel quantizes x per 64 values where K and the weight groups allow (X64: half the float work
   * per output; H200: −10% on a 512-token prompt, so off); pf / pfw (64- / 128-column tiles): the next tile
   * fetched during the multiply, else (NOPF) right before it is stored (fewer live registers); kt2w: KT2 for
   * the 128-column tiles too. H200: 128-column tiles with KT2 and NOPF +3.1% at 512 (2048-row engine), +3.4%
   * (512-row), +4.1% at 4k; either alone, or NOPF on the 64-column ones, was slower (bench/NOTES.md #44).
   * ch: each output's eight dot products per 32 values as one chain from 1.5·2^23's bits, then one exact
   * subtraction and two FMAs into the accumulator (CH; other bits than without; H200 A/B, two calls: prompts
   * of 512 +2%, 4k +2 to +12%, 20k +1 to +7%; #75).
   */
  tiled: { TM: number; wideN: number; x8: boolean; kt2: boolean; x8MinGrid: number; splitK: number; splitKMaxRows: number; x64: boolean; pf: boolean; pfw: boolean; kt2w: boolean; ch: boolean };
}

const tuning: MatmulTuning = {
  vec: { T: 0, U: 8, V: 2, PF: 2, WG: 64, R: 1, magic: true },
  x8: { on: true, WG: 256, minWeights: 1 << 22, wideWG: 128, wideN: 4096, PF: 1, maxK: 8192 },
  tiled: { TM: 8, wideN: 4096, x8: true, kt2: true, x8MinGrid: 256, splitK: 2, splitKMaxRows: 4096, x64: false, pf: true, pfw: false, kt2w: true, ch: true },
};

/** Overrides kernel shape choices (benchmark sweeps). Returns the previous setting. */
export function setMatmulTuning(
  t: Partial<{ vec: Partial<MatmulTuning["vec"]>; x8: Partial<MatmulTuning["x8"]>; tiled: Partial<MatmulTuning["tiled"]> }>,
): MatmulTuning {
  const prev = { vec: { ...tuning.vec }, x8: { ...tuning.x8 }, tiled: { ...tuning.tiled } };
  Object.assign(tuning.vec, t.vec ?? {});
  Object.assign(tuning.x8, t.x8 ?? {});
  Object.assign(tuning.tiled, t.tiled ?? {});
  return prev;
}

/**
 * Whether matmuls of this weight in this mode take int8 x (vector: `lib/q4x8.wgsl`; tiled:
 * `matmul_tiled_x8.wgsl`). It depends on the weight, the mode and the device only, never on the rows, so a
 * row's bits are the same alone or in a batch. Needs `dot4I8Packed` (WGSL's packed_4x8_integer_dot_product),
 * a fixed subgroup size (shuffles within teams and quantization groups) and, in vector mode, one row of int8
 * x in workgroup memory. Elsewhere the f32-x kernels run.
 */
export function usesX8(info: Gpu["info"], w: Pick<Linear, "format" | "K" | "N">, mode: "vec" | "tiled" = "vec"): boolean {
  const f = w.format;
  if (f.kind !== "q" || f.bits !== 4 || f.groupSize % 32 !== 0 || w.K % 32 !== 0 || w.N * w.K < tuning.x8.minWeights) return false;
  const sub = info.subgroupMinSize;
  if (!info.int8Dot || !info.subgroups || sub < 4 || sub !== info.subgroupMaxSize) return false;
  // The tiled kernel's workgroup memory is fixed (64 rows and 128 columns of one 32-value tile: 7 KiB).
  if (mode === "tiled") return tuning.tiled.x8;
  if (!tuning.x8.on || (w.K > tuning.x8.maxK && w.N < tuning.x8.wideN)) return false;
  return x8Bytes(1, w.K, Math.max(tuning.x8.WG, tuning.x8.wideWG)) <= info.maxWorkgroupStorage;
}

/** Values per int8 scale of x in an int8-x matmul of this weight: 64 under `tiled.x64` where K and the groups allow, else 32. */
export function x8Group(w: Pick<Linear, "format" | "K">, mode: "vec" | "tiled"): 32 | 64 {
  const f = w.format;
  return mode === "tiled" && tuning.tiled.x64 && f.kind === "q" && f.groupSize % 64 === 0 && w.K % 64 === 0 ? 64 : 32;
}

/** Workgroup memory of the int8-x path: MB rows of int8 x, their (sx, Σx̂) pairs, the reduction slots. */
function x8Bytes(MB: number, K: number, WG: number): number {
  return MB * K + MB * (K / 32) * 8 + WG * 4;
}

/** y[row0+m, nOff+n] (=|+=) Σ_k x[row0+m, k]·W[n, k] (+ bias[n]). */
export async function matmul(ctx: OpContext, a: MatmulArgs): Promise<void> {
  const { w, M } = a;
  const K = w.K;
  const unit = w.format.kind === "q" ? 32 : 8;
  check(K % unit === 0, "matmul", `${w.name}: K=${K} must be a multiple of ${unit}`);
  check(M > 0, "matmul", `${w.name}: M=${M}`);
  check(!a.norm || a.mode === "vec", "matmul", `${w.name}: a fused norm needs vector mode`);
  const swiglu = a.out === "swiglu";
  check(!swiglu || canSwiGLU(w, a.mode), "matmul", `${w.name}: a fused SwiGLU needs vector mode, 4-bit weights in one shard, even N, no bias`);
  const ldy = a.ldy ?? (swiglu ? w.N / 2 : w.N);
  const nOff = a.nOff ?? 0;
  check(nOff + (swiglu ? w.N / 2 : w.N) <= ldy, "matmul", `${w.name}: columns ${nOff}+${w.N} exceed ldy=${ldy}`);
  const { defines, overrides } = formatVariant(w.format, a.mode);
  if (a.out === "f32") defines.OUT_F32 = 1;
  if (a.out === "add") defines.ADD = 1;
  if (swiglu) Object.assign(defines, { SWIGLU: 1, OUT_F32: 1 });
  if (w.bias) defines.BIAS = 1;
  const info = ctx.gpu.info;
  for (const s of w.shards) {
    const buffers: Record<string, any> = { x: a.x, w: s.w, y: a.y };
    if (s.scales) buffers.scales = s.scales;
    if (s.biases) buffers.biases = s.biases;
    if (w.bias) buffers.bias = { buffer: w.bias, offset: s.n0 * 4, size: s.n * 4 };
    const params = { M, N: s.n, K, row0: a.row0 ?? 0, ldy, n_off: nOff + s.n0 };
    if (a.mode === "vec" && usesX8(info, w)) {
      // Int8 x: teams of up to one subgroup (32 lanes), each workgroup quantizes x for its columns.
      const sub = info.subgroupMinSize;
      const T = Math.min(32, sub);
      const wg = s.n >= tuning.x8.wideN ? tuning.x8.wideWG : tuning.x8.WG;
      const WG = Math.max(sub, wg - (wg % sub));   // whole subgroups: the Σx² slots are per subgroup
      const MB = M > 1 && x8Bytes(4, K, WG) <= info.maxWorkgroupStorage ? 4 : 1;
      if (a.norm) buffers.gamma = a.norm.weight;
      const xdefs = { ...defines, X8: 1, XW: K / 16, MB, R: 4, QV4: 1, ...(a.norm ? { NORM: 1 } : {}), ...(tuning.x8.PF === 2 ? { PF2: 1 } : {}) };
      await record(ctx, { file: "matmul_vec.wgsl", defines: xdefs, overrides: { ...overrides, WG, T, SGS: sub } }, {
        buffers,
        params: { ...params, eps: a.norm?.eps ?? 0 },
        grid: grid1d(Math.ceil(s.n / ((WG / T) * 4))),   // 4 weight rows per team (SWIGLU: 2 gates, 2 ups)
      });
    } else if (a.mode === "vec") {
      const units = K / unit;
      const q4 = w.format.kind === "q" && w.format.bits === 4;
      // Q4 chunks: QV words (8·QV values) per lane step; one scale group holds whole chunks.
      const qv = q4 ? Math.min(tuning.vec.V, (w.format as { groupSize: number }).groupSize / 8) : 1;
      const v = vecShape(info, q4 ? K / (8 * qv) : units, q4);
      if (a.norm) {
        buffers.gamma = a.norm.weight;
      }
      const magic = tuning.vec.magic && q4;
      const vdefs = {
        ...defines, MB: M === 1 ? 1 : 4, ...(M === 1 ? {} : { MB4: 1 }), R: v.R, ...(v.TS > 1 ? { TEAM_SUBGROUP: 1 } : {}),
        ...(magic ? { QMAGIC: 1 } : {}), ...(a.norm ? { NORM: 1 } : {}), ...(q4 ? { QV: qv, [`QV${qv}`]: 1, ...(tuning.vec.PF === 2 ? { PF2: 1 } : {}) } : {}),
        ...(q4 && (tuning.vec.probe === "nomath" || tuning.vec.probe === "wonly") ? { PROBE_NOMATH: 1 } : {}),
        ...(q4 && (tuning.vec.probe === "noscale" || tuning.vec.probe === "wonly") ? { PROBE_NOSCALE: 1 } : {}),
      };
      await record(ctx, { file: "matmul_vec.wgsl", defines: vdefs, overrides: { ...overrides, WG: v.WG, T: v.T, TS: v.TS } }, {
        buffers,
        params: { ...params, eps: a.norm?.eps ?? 0 },
        grid: grid1d(Math.ceil(s.n / ((v.WG / v.T) * v.R))),
      });
    } else if (!a.f32x && usesX8(info, w, "tiled")) {
      // 64-column tiles (and two sub-tiles per stage) where 128-column ones would give a small grid: twice
      // the workgroups to fill the GPU with. Every tile shape gives the same bits, so M may choose it.
      const t = tuning.tiled;
      const bn = s.n >= t.wideN || Math.ceil(s.n / 128) * Math.ceil(M / 64) >= t.x8MinGrid ? 128 : 64;
      const x64 = x8Group(w, "tiled") === 64;
      const tile = {
        ...(bn === 64 ? { BN64: 1 } : {}), ...((bn === 64 && t.kt2) || (bn === 128 && t.kt2w) || x64 ? { KT2: 1 } : {}), ...(x64 ? { X64: 1 } : {}),
        ...((bn === 128 ? t.pfw : t.pf) ? {} : { NOPF: 1 }), ...(t.ch && !x64 ? { CH: 1 } : {}),
      };
      const { splits, kc } = splitsFor(s.n, K, a.splitK);
      if (splits > 1) {
        // Partials (splits, M, N) f32 into the scratch, then the sum in order with the epilogue.
        const { BIAS: _b, ADD: _a, ...pdefs } = defines;
        await record(ctx, { file: "matmul_tiled_x8.wgsl", defines: { ...pdefs, ...tile, OUT_F32: 1, SPLITK: 1 }, overrides }, {
          buffers: { ...buffers, y: a.splitK!.buffer },
          params: { ...params, ldy: s.n, n_off: 0, kc },
          grid: [Math.ceil(s.n / bn), Math.ceil(M / 64), splits],
        });
        await record(ctx, { file: "matmul_splitk.wgsl", defines }, {
          buffers: { part: a.splitK!.buffer, y: a.y, ...(buffers.bias ? { bias: buffers.bias } : {}) },
          params: { M, N: s.n, row0: params.row0, ldy, n_off: params.n_off, splits },
          grid: [Math.ceil(s.n / 256), M, 1],
        });
        continue;
      }
      await record(ctx, { file: "matmul_tiled_x8.wgsl", defines: { ...defines, ...tile }, overrides }, {
        buffers,
        params,
        grid: [Math.ceil(s.n / bn), Math.ceil(M / 64), 1],
      });
    } else {
      const { TM } = tuning.tiled;
      // 128-wide tiles double the work per staged tile; narrow matrices keep 64 so the grid fills the GPU.
      const wide = TM === 8 && s.n >= tuning.tiled.wideN;
      const tdefs = { ...defines, TM, ...(TM === 8 ? { TM8: 1 } : {}), ...(wide ? { TN8: 1 } : {}) };
      await record(ctx, { file: "matmul_tiled.wgsl", defines: tdefs, overrides }, {
        buffers,
        params,
        grid: [Math.ceil(s.n / (wide ? 128 : 64)), Math.ceil(M / (16 * TM)), 1],
      });
    }
  }
}

/** Rows of split-K scratch for a step capacity of `rows` (0 where split-K is off: no buffer to speak of). */
export function splitKRows(rows: number): number {
  return tuning.tiled.splitK > 1 && rows <= tuning.tiled.splitKMaxRows ? tuning.tiled.splitK * rows : 0;
}

/**
 * K-splits of an int8-x tiled matmul and the k per split (a multiple of 64): `tuning.tiled.splitK` parts for
 * narrow matrices (N < wideN) in steps of at most splitKMaxRows rows whose partials fit the scratch at its
 * full row capacity, else one. Depends on N, K and the engine's step capacity only, never on M.
 */
export function splitsFor(N: number, K: number, scratch?: { buffer: GPUBuffer; rows: number }): { splits: number; kc: number } {
  const one = { splits: 1, kc: K };
  const want = Math.min(tuning.tiled.splitK, Math.floor(K / 64));
  if (want < 2 || !scratch || N >= tuning.tiled.wideN || scratch.rows > tuning.tiled.splitKMaxRows) return one;
  const kc = Math.ceil(K / want / 64) * 64;
  const splits = Math.ceil(K / kc);
  return splits * scratch.rows * N * 4 <= scratch.buffer.size ? { splits, kc } : one;
}

/** Whether `matmul(..., out: "swiglu")` can take this weight ([gate | up] in one 4-bit shard). */
export function canSwiGLU(w: Linear, mode: "vec" | "tiled"): boolean {
  return mode === "vec" && w.format.kind === "q" && w.format.bits === 4 && w.shards.length === 1 && w.N % 2 === 0 && !w.bias;
}

/**
 * Team shape of the vector kernel. It depends on K and the device only, never on M: the lane count sets the
 * summation order, so a row's bits are the same alone or in a batch.
 */
function vecShape(info: Gpu["info"], units: number, q4: boolean): { T: number; TS: number; WG: number; R: number } {
  const sub = info.subgroups ? info.subgroupMinSize : 0;
  let T = tuning.vec.T;
  if (q4) {
    // Q4 (`units` = chunks of QV words) teams may span subgroups (sub-team sums by shuffle, then through
    // workgroup memory): ~U chunks per lane, so short rows still have enough lanes, and loads, in flight.
    if (!T) {
      T = sub >= 2 ? sub * Math.ceil(units / (sub * tuning.vec.U)) : Math.min(32, Math.max(2, nextPow2(Math.ceil(units / tuning.vec.U))));
      T = Math.min(T, 256 - (256 % Math.max(1, sub)));
    }
    let TS = 1;
    while (TS * 2 <= sub && T % (TS * 2) === 0) TS *= 2;
    return { T, TS, WG: T * Math.max(1, Math.floor(tuning.vec.WG / T)), R: 4 };
  }
  // Other formats: a team is at most a subgroup (shuffles) or a power of two (workgroup tree), ~8 units per lane.
  const R = tuning.vec.R;
  T = nextPow2(Math.max(R, T || Math.min(32, Math.max(2, Math.ceil(units / 8)))));
  const WG = Math.max(tuning.vec.WG, T);
  return { T, TS: info.subgroups && sub >= T ? T : 1, WG, R };
}

function nextPow2(n: number): number {
  let p = 1;
  while (p < n) p *= 2;
  return p;
}
