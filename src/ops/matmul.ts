/**
 * Host wrapper of the matmul family: the vector kernels for decode-like rows (weights streamed once for all
 * rows: `matmul_vec.wgsl`, 4-bit weights `matmul_vec_q4.wgsl` or, on int8 x, `matmul_vec_q4x8.wgsl`) and the
 * tiled ones for prefill chunks (`matmul_tiled.wgsl`; 4-bit weights on int8 x `matmul_tiled_x8.wgsl`, split-K
 * parts summed by `matmul_splitk.wgsl`; on matrix units src/ops/matmul_matrix.ts). The caller picks the mode
 * by row kind, not by count, so a row's result never depends on what else is in the batch. Shape choices come
 * from the device's kernel profile.
 * @module
 */
import type { Gpu } from "../gpu/device.ts";
import { type BufferResource, grid1d } from "../gpu/kernel.ts";
import type { Defines } from "../gpu/preprocess.ts";
import type { KernelProfile, MatmulProfile } from "../gpu/profile.ts";
import { check, type OpContext, record } from "./context.ts";
import { formatVariant, type Linear } from "./linear.ts";
import { type MatrixScratch, rowsF16, tiledMatrix, usesMatrixUnits } from "./matmul_matrix.ts";

export { usesMatrixUnits };

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
  /** Vector mode: int8 x for a 4-bit weight of any size (the MoE router: the profile's `moe.routerInt8X`). */
  int8AnySize?: boolean;
  /**
   * Tiled mode on matrix units (`usesMatrixUnits`): f16 scratch for x's rows (rows, K) and the weight
   * (N, K) of the largest shard, f32 scratch for their product's tiles (`matrixScratchBytes`).
   */
  matrixScratch?: MatrixScratch;
}

/**
 * Whether matmuls of this weight in this mode take int8 x (vector: `matmul_vec_q4x8.wgsl`; tiled:
 * `matmul_tiled_x8.wgsl`). It depends on the weight, the mode and the device only, never on the rows, so a
 * row's bits are the same alone or in a batch. Needs `dot4I8Packed` (WGSL's packed_4x8_integer_dot_product),
 * a fixed subgroup size (shuffles within teams and quantization groups) and, in vector mode, one row of int8
 * x in workgroup memory. Elsewhere the f32-x kernels run.
 */
export function usesInt8X(
  gpu: Pick<Gpu, "info" | "profile">,
  w: Pick<Linear, "format" | "K" | "N">,
  mode: "vec" | "tiled" = "vec",
  minWeights = gpu.profile.matmul.int8MinWeights,
): boolean {
  const { info } = gpu;
  const p = gpu.profile.matmul;
  const f = w.format;
  if (f.kind !== "q" || f.bits !== 4 || f.groupSize % 32 !== 0 || w.K % 32 !== 0 || w.N * w.K < minWeights) {
    return false;
  }
  const sub = info.subgroupMinSize;
  if (!info.int8Dot || !info.subgroups || sub < 4 || sub !== info.subgroupMaxSize) return false;
  // The tiled kernel's workgroup memory is fixed (64 rows and 128 columns of two 32-value sub-tiles: 15 KiB).
  if (mode === "tiled") return p.tiled.int8;
  const v = p.vectorInt8;
  if (!v.enabled || (w.K > v.maxK && w.N < v.wideN)) return false;
  return x8Bytes(1, w.K, Math.max(v.workgroupSize, v.wideWorkgroupSize)) <= info.maxWorkgroupStorage;
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
  check(
    !swiglu || canSwiGLU(w, a.mode),
    "matmul",
    `${w.name}: a fused SwiGLU needs vector mode, 4-bit weights in one shard, even N, no bias`,
  );
  const ldy = a.ldy ?? (swiglu ? w.N / 2 : w.N);
  const nOff = a.nOff ?? 0;
  check(
    nOff + (swiglu ? w.N / 2 : w.N) <= ldy,
    "matmul",
    `${w.name}: columns ${nOff}+${w.N} exceed ldy=${ldy}`,
  );
  const { defines, overrides } = formatVariant(w.format, a.mode);
  if (a.out === "f32") defines.OUT_F32 = 1;
  if (a.out === "add") defines.ADD = 1;
  if (swiglu) Object.assign(defines, { SWIGLU: 1, OUT_F32: 1 });
  if (w.bias) defines.BIAS = 1;
  if (a.norm) defines.NORM = 1;
  const matrix = a.mode === "tiled" && !a.f32x && usesMatrixUnits(ctx.gpu, w);
  if (matrix) await rowsF16(ctx, a, a.matrixScratch);
  for (const s of w.shards) {
    const buffers: Record<string, BufferResource> = { x: a.x, w: s.w, y: a.y };
    if (s.scales) buffers.scales = s.scales;
    if (s.biases) buffers.biases = s.biases;
    if (w.bias) buffers.bias = { buffer: w.bias, offset: s.n0 * 4, size: s.n * 4 };
    if (a.norm) buffers.gamma = a.norm.weight;
    const shard: Shard = {
      buffers,
      defines,
      overrides,
      params: { M, N: s.n, K, row0: a.row0 ?? 0, ldy, n_off: nOff + s.n0 },
    };
    if (a.mode === "vec") {
      const vparams = { ...shard.params, eps: a.norm?.eps ?? 0 };
      if (usesInt8X(ctx.gpu, w, "vec", a.int8AnySize ? 0 : undefined)) {
        await vectorInt8(ctx, { ...shard, params: vparams });
      } else await vector(ctx, { ...shard, params: vparams }, w);
    } else if (matrix) {
      await tiledMatrix(ctx, shard, a.matrixScratch!);
    } else if (!a.f32x && usesInt8X(ctx.gpu, w, "tiled")) {
      await tiledInt8(ctx, shard, a.splitK);
    } else {
      await tiled(ctx, shard);
    }
  }
}

/** One weight shard's bindings, defines, overrides and params, as the kernels below take them. */
export interface Shard {
  buffers: Record<string, BufferResource>;
  defines: Defines;
  overrides: Record<string, number>;
  params: Record<string, number> & { M: number; N: number; K: number };
}

/** Decode rows of 4-bit weights on int8 x: teams of up to one subgroup, each workgroup quantizes x once. */
async function vectorInt8(ctx: OpContext, s: Shard): Promise<void> {
  const info = ctx.gpu.info;
  const p = ctx.gpu.profile.matmul.vectorInt8;
  const { M, N, K } = s.params;
  const sub = info.subgroupMinSize;
  const T = Math.min(32, sub);
  const wg = N >= p.wideN ? p.wideWorkgroupSize : p.workgroupSize;
  const WG = Math.max(sub, wg - (wg % sub)); // whole subgroups: the Σx² slots are per subgroup
  const rows = M > 1 && x8Bytes(4, K, WG) <= info.maxWorkgroupStorage ? 4 : 1;
  const defines = { ...s.defines, INT8_X_VEC4S: K / 16, ROWS_PER_BLOCK: rows };
  await record(
    ctx,
    { file: "matmul_vec_q4x8.wgsl", defines, overrides: { ...s.overrides, WG, T, SGS: sub } },
    {
      buffers: s.buffers,
      params: s.params,
      grid: grid1d(Math.ceil(N / ((WG / T) * 4))), // 4 weight rows per team (SWIGLU: 2 gates, 2 ups)
    },
  );
}

/** Decode rows on f32 x: 4-bit weights in 16-value chunks per lane, other formats in 32- or 8-value units. */
async function vector(ctx: OpContext, s: Shard, w: Linear): Promise<void> {
  const { M, N, K } = s.params;
  const q4 = w.format.kind === "q" && w.format.bits === 4;
  const v = vectorShape(ctx.gpu, q4 ? K / 16 : K / (w.format.kind === "q" ? 32 : 8), q4);
  const defines = {
    ...s.defines,
    ROWS_PER_BLOCK: M === 1 ? 1 : 4,
    ...(q4 && M > 1 ? { FOUR_ROW_BLOCKS: 1 } : {}),
    ...(q4 ? {} : { COLUMNS_PER_TEAM: v.R }),
    ...(v.TS > 1 ? { TEAM_SUBGROUP: 1 } : {}),
  };
  const file = q4 ? "matmul_vec_q4.wgsl" : "matmul_vec.wgsl";
  await record(ctx, {
    file,
    defines,
    overrides: { ...s.overrides, WG: v.WG, T: v.T, ...(q4 ? { TS: v.TS } : {}) },
  }, {
    buffers: s.buffers,
    params: s.params,
    grid: grid1d(Math.ceil(N / ((v.WG / v.T) * v.R))),
  });
}

/**
 * Prefill rows of 4-bit weights on int8 x: 128-column tiles, or 64 where 128 would give a small grid (twice
 * the workgroups to fill the GPU with; every tile shape gives the same bits, so M may choose it). Narrow
 * matrices may split K (`splitsFor`).
 */
async function tiledInt8(ctx: OpContext, s: Shard, scratch?: MatmulArgs["splitK"]): Promise<void> {
  const t = ctx.gpu.profile.matmul.tiled;
  const { M, N, K } = s.params;
  const bn = N >= t.wideN || Math.ceil(N / 128) * Math.ceil(M / 64) >= t.wideTileMinWorkgroups ? 128 : 64;
  const tile: Defines = bn === 64 ? { NARROW_TILE: 1 } : {};
  const { splits, kc } = splitsFor(t, N, K, scratch, 64);
  if (splits > 1) {
    // Partials (splits, M, N) f32 into the scratch, then the sum in order with the epilogue.
    const { BIAS: _b, ADD: _a, ...pdefs } = s.defines;
    await record(ctx, {
      file: "matmul_tiled_x8.wgsl",
      defines: { ...pdefs, ...tile, OUT_F32: 1, SPLITK: 1 },
      overrides: s.overrides,
    }, {
      buffers: { ...s.buffers, y: scratch!.buffer },
      params: { ...s.params, ldy: N, n_off: 0, kc },
      grid: [Math.ceil(N / bn), Math.ceil(M / 64), splits],
    });
    await record(ctx, { file: "matmul_splitk.wgsl", defines: s.defines }, {
      buffers: { part: scratch!.buffer, y: s.buffers.y, ...(s.buffers.bias ? { bias: s.buffers.bias } : {}) },
      params: { M, N, row0: s.params.row0, ldy: s.params.ldy, n_off: s.params.n_off, splits, mp: M, ldp: N },
      grid: [Math.ceil(N / 256), M, 1],
    });
    return;
  }
  await record(ctx, {
    file: "matmul_tiled_x8.wgsl",
    defines: { ...s.defines, ...tile },
    overrides: s.overrides,
  }, {
    buffers: s.buffers,
    params: s.params,
    grid: [Math.ceil(N / bn), Math.ceil(M / 64), 1],
  });
}

/** Prefill rows on f32 x: 128×64 tiles, 128×128 for wide matrices (narrow ones keep 64 to fill the GPU). */
async function tiled(ctx: OpContext, s: Shard): Promise<void> {
  const { M, N } = s.params;
  const wide = N >= ctx.gpu.profile.matmul.tiled.wideN;
  await record(ctx, {
    file: "matmul_tiled.wgsl",
    defines: { ...s.defines, ...(wide ? { WIDE_TILE: 1 } : {}) },
    overrides: s.overrides,
  }, {
    buffers: s.buffers,
    params: s.params,
    grid: [Math.ceil(N / (wide ? 128 : 64)), Math.ceil(M / 128), 1],
  });
}

/** Rows of split-K scratch for a step capacity of `rows` (0 where split-K is off: no buffer to speak of). */
export function splitKRows(profile: KernelProfile, rows: number): number {
  const t = profile.matmul.tiled;
  return t.splitK > 1 && rows <= t.splitKMaxRows ? t.splitK * rows : 0;
}

/**
 * K-splits of a tiled int8-x matmul and the k per split (a multiple of `unit`, the kernel's K step: 64):
 * `splitK` parts for narrow matrices (N < wideN) in steps of at most splitKMaxRows rows whose partials fit
 * the scratch at its full row capacity, else one. Depends on N, K and the engine's step capacity only, never
 * on M. (Matrix units: `matrixSplits`.)
 */
export function splitsFor(
  t: MatmulProfile["tiled"],
  N: number,
  K: number,
  scratch: MatmulArgs["splitK"] | undefined,
  unit: number,
): { splits: number; kc: number } {
  const one = { splits: 1, kc: K };
  const want = Math.min(t.splitK, Math.floor(K / unit));
  if (want < 2 || !scratch || N >= t.wideN || scratch.rows > t.splitKMaxRows) return one;
  const kc = Math.ceil(K / want / unit) * unit;
  const splits = Math.ceil(K / kc);
  return splits * scratch.rows * N * 4 <= scratch.buffer.size ? { splits, kc } : one;
}

/** Whether `matmul(..., out: "swiglu")` can take this weight ([gate | up] in one 4-bit shard). */
export function canSwiGLU(w: Linear, mode: "vec" | "tiled"): boolean {
  return mode === "vec" && w.format.kind === "q" && w.format.bits === 4 && w.shards.length === 1 &&
    w.N % 2 === 0 && !w.bias;
}

/**
 * Team shape of the vector kernel on f32 x. It depends on K and the device only, never on M: the lane count
 * sets the summation order, so a row's bits are the same alone or in a batch.
 */
function vectorShape(
  gpu: Pick<Gpu, "info" | "profile">,
  units: number,
  q4: boolean,
): { T: number; TS: number; WG: number; R: number } {
  const info = gpu.info;
  const p = gpu.profile.matmul.vector;
  const sub = info.subgroups ? info.subgroupMinSize : 0;
  let T = p.lanesPerTeam;
  if (q4) {
    // 4-bit (`units`: 16-value chunks): teams may span subgroups (sub-team sums by shuffle, then through
    // workgroup memory), ~chunksPerLane chunks per lane, so short rows still have lanes and loads in flight.
    if (!T) {
      T = sub >= 2
        ? sub * Math.ceil(units / (sub * p.chunksPerLane))
        : Math.min(32, Math.max(2, nextPow2(Math.ceil(units / p.chunksPerLane))));
      T = Math.min(T, 256 - (256 % Math.max(1, sub)));
    }
    let TS = 1;
    while (TS * 2 <= sub && T % (TS * 2) === 0) TS *= 2;
    return { T, TS, WG: T * Math.max(1, Math.floor(p.workgroupSize / T)), R: 4 };
  }
  // Other formats: a team is at most a subgroup (shuffles) or a power of two (workgroup tree), ~8 units each.
  const R = p.columnsPerTeam;
  T = nextPow2(Math.max(R, T || Math.min(32, Math.max(2, Math.ceil(units / 8)))));
  const WG = Math.max(p.workgroupSize, T);
  return { T, TS: info.subgroups && sub >= T ? T : 1, WG, R };
}

function nextPow2(n: number): number {
  let p = 1;
  while (p < n) p *= 2;
  return p;
}
