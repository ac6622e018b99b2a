/**
 * Host wrapper of the prefill matmul on matrix units (Dawn's subgroup matrices): x's rows to f16
 * (`rows_f16.wgsl`), each weight shard dequantized to f16 in blocks of rows (`dequant_f16.wgsl`), then the
 * f16 GEMM with f32 accumulation and the usual epilogues (`matmul_sgmat.wgsl`). Both f16 copies live in a
 * scratch the engine allocates once (`matrixScratchFor`).
 * @module
 */
import type { Gpu } from "../gpu/device.ts";
import { type BufferResource, grid1d } from "../gpu/kernel.ts";
import type { Defines } from "../gpu/preprocess.ts";
import { matrixKernelsRun } from "../platform/mod.ts";
import { check, type OpContext, record } from "./context.ts";
import type { Linear } from "./linear.ts";
import { type MatmulArgs, type Shard, splitsFor } from "./matmul.ts";

/** f16 copies of x's rows (rows, K) and of a block of weight rows (N, K). */
export interface MatrixScratch {
  x: GPUBuffer;
  w: GPUBuffer;
}

/** Ceiling of the weight scratch: a larger shard is dequantized and multiplied in blocks of rows. */
export const MATRIX_WEIGHT_SCRATCH_BYTES = 256 * 2 ** 20;

/**
 * Whether prefill matmuls of this weight run on matrix units: the profile's `tiled.matrixUnits`, an adapter
 * offering f16 × f16 → f32 16×16×16 subgroup matrices (Dawn), subgroups of 32, f16, and 4- or 8-bit weights
 * with K a multiple of 32. Like int8 x it depends on the weight and the device only.
 */
export function usesMatrixUnits(
  gpu: Pick<Gpu, "info" | "profile">,
  w: Pick<Linear, "format" | "K">,
): boolean {
  const { info } = gpu;
  const f = w.format;
  return gpu.profile.matmul.tiled.matrixUnits && info.f16 && info.subgroups &&
    matrixKernelsRun(info.subgroupMatrix, info.subgroupMinSize, info.subgroupMaxSize) &&
    info.maxWorkgroupStorage >= 24576 &&
    f.kind === "q" && (f.bits === 4 || f.bits === 8) && f.groupSize % 8 === 0 && w.K % 32 === 0;
}

/**
 * Scratch sizes for `rows` prefill rows and these weights (those that take matrix units), or null where none
 * does: x at the largest K, the weight at its largest shard up to MATRIX_WEIGHT_SCRATCH_BYTES.
 */
export function matrixScratchBytes(
  gpu: Pick<Gpu, "info" | "profile">,
  rows: number,
  linears: readonly Linear[],
): { x: number; w: number } | null {
  const on = linears.filter((l) => usesMatrixUnits(gpu, l));
  if (!on.length) return null;
  const maxK = Math.max(...on.map((l) => l.K));
  const w = Math.max(...on.flatMap((l) => l.shards.map((s) => s.n * l.K * 2)));
  // At least 128 rows of the longest K: one tile's worth per block.
  return { x: rows * maxK * 2, w: Math.max(128 * maxK * 2, Math.min(w, MATRIX_WEIGHT_SCRATCH_BYTES)) };
}

/** x's rows [row0, row0 + M) as f16 into the scratch, once for all of a weight's shards. */
export async function rowsF16(ctx: OpContext, a: MatmulArgs, sc?: MatrixScratch): Promise<void> {
  const K = a.w.K;
  check(!!sc, "matmul", `${a.w.name}: matrix units need MatmulArgs.matrixScratch`);
  check(a.M * K * 2 <= sc!.x.size, "matmul", `${a.w.name}: ${a.M} rows of K=${K} exceed the f16 x scratch`);
  check(128 * K * 2 <= sc!.w.size, "matmul", `${a.w.name}: K=${K} exceeds the f16 weight scratch`);
  await record(ctx, { file: "rows_f16.wgsl" }, {
    buffers: { x: a.x, out: sc!.x },
    params: { M: a.M, K, row0: a.row0 ?? 0 },
    grid: grid1d(Math.ceil((a.M * K) / 8 / 256)),
  });
}

/**
 * One weight shard on matrix units: blocks of its rows (as many as the scratch holds, a multiple of 128)
 * dequantized to f16, each followed by its 128×128 tiles of f16 products accumulated in f32; narrow matrices
 * split K into partials that matmul_splitk.wgsl sums with the epilogue.
 */
export async function tiledMatrix(
  ctx: OpContext,
  s: Shard,
  sc: MatrixScratch,
  splitK?: MatmulArgs["splitK"],
): Promise<void> {
  const { M, N, K } = s.params;
  const { SCALE_F16, OUT_F32, ADD, BIAS } = s.defines;
  const epilogue: Defines = {};
  if (OUT_F32) epilogue.OUT_F32 = 1;
  if (ADD) epilogue.ADD = 1;
  if (BIAS) epilogue.BIAS = 1;
  const block = Math.floor(sc.w.size / (2 * K * 128)) * 128;
  const wordsPerRow = (K * s.overrides.BITS) / 32;
  const groupsPerRow = K / s.overrides.GS;
  for (let n0 = 0; n0 < N; n0 += block) {
    const n = Math.min(block, N - n0);
    // A block's weight, scales and biases start at row n0: blocks of 128 rows keep each offset a multiple of
    // 256 bytes (K a multiple of 32; scales are 2 bytes a group).
    const rowsOf = (buf: BufferResource | undefined, bytesPerRow: number): BufferResource => {
      const b = buf as GPUBuffer | GPUBufferBinding;
      return "buffer" in b ? { buffer: b.buffer, offset: (b.offset ?? 0) + n0 * bytesPerRow } : {
        buffer: b,
        offset: n0 * bytesPerRow,
      };
    };
    const scaleRow = groupsPerRow * 2;
    await record(ctx, {
      file: "dequant_f16.wgsl",
      defines: SCALE_F16 ? { SCALE_F16 } : {},
      overrides: s.overrides,
    }, {
      buffers: {
        w: n === N ? s.buffers.w : rowsOf(s.buffers.w, wordsPerRow * 4),
        scales: n === N ? s.buffers.scales : rowsOf(s.buffers.scales, scaleRow),
        biases: n === N ? s.buffers.biases : rowsOf(s.buffers.biases, scaleRow),
        out: sc.w,
      },
      params: { N: n, K },
      grid: grid1d(Math.ceil((n * K) / 8 / 256)),
    });
    const buffers: Record<string, BufferResource> = { a: sc.x, b: sc.w, y: s.buffers.y };
    if (s.buffers.bias) buffers.bias = n === N ? s.buffers.bias : rowsOf(s.buffers.bias, 4);
    const params = { ...s.params, N: n, n_off: s.params.n_off + n0 };
    const grid: [number, number, number] = [Math.ceil(M / 128), Math.ceil(n / 128), 1];
    // Narrow matrices have too few 128×128 tiles to fill the GPU: split K as the int8-x path does.
    const { splits, kc } = splitsFor(ctx.gpu.profile.matmul.tiled, n, K, splitK, 32);
    if (splits === 1) {
      await record(ctx, { file: "matmul_sgmat.wgsl", defines: epilogue }, { buffers, params, grid });
      continue;
    }
    // Partials (splits, M, n) f32 into the scratch, then their sum in order with the epilogue.
    await record(ctx, { file: "matmul_sgmat.wgsl", defines: { OUT_F32: 1, SPLITK: 1 } }, {
      buffers: { a: sc.x, b: sc.w, y: splitK!.buffer },
      params: { ...params, row0: 0, ldy: n, n_off: 0, kc },
      grid: [grid[0], grid[1], splits],
    });
    await record(ctx, { file: "matmul_splitk.wgsl", defines: epilogue }, {
      buffers: { part: splitK!.buffer, y: buffers.y, ...(buffers.bias ? { bias: buffers.bias } : {}) },
      params: { M, N: n, row0: s.params.row0, ldy: s.params.ldy, n_off: params.n_off, splits },
      grid: [Math.ceil(n / 256), M, 1],
    });
  }
}
