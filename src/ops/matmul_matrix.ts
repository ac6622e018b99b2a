/**
 * Host wrapper of the prefill matmul on matrix units (Dawn's subgroup matrices): x's rows to f16
 * (`rows_f16.wgsl`), each weight shard dequantized to f16 in blocks of rows (`dequant_f16.wgsl`, or inside
 * the GEMM for short steps), the f16 GEMM into f32 tiles (`matmul_sgmat.wgsl`), then their sum over K-splits
 * with the usual epilogues (`matmul_splitk.wgsl`). The engine allocates the scratches once
 * (`matrixScratchBytes`).
 * @module
 */
import type { Gpu } from "../gpu/device.ts";
import { type BufferResource, grid1d } from "../gpu/kernel.ts";
import type { Defines } from "../gpu/preprocess.ts";
import { matrixKernelsFit } from "../platform/mod.ts";
import { check, type OpContext, record } from "./context.ts";
import type { Linear } from "./linear.ts";
import type { MatmulProfile } from "../gpu/profile.ts";
import type { MatmulArgs, Shard } from "./matmul.ts";

/** f16 copies of x's rows (rows, K) and of a block of weight rows (N, K); the f32 tiles of their product. */
export interface MatrixScratch {
  x: GPUBuffer;
  w: GPUBuffer;
  y: GPUBuffer;
}

/** Ceiling of the weight and tile scratches: larger shards are dequantized and multiplied in row blocks. */
export const MATRIX_SCRATCH_CAP_BYTES = 256 * 2 ** 20;

/** Rows up to a whole 128-row tile: the kernel reads and writes whole tiles. */
const whole = (n: number) => Math.ceil(n / 128) * 128;

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
  return gpu.profile.matmul.tiled.matrixUnits && matrixKernelsFit(info, 24576) &&
    f.kind === "q" && (f.bits === 4 || f.bits === 8) && f.groupSize % 8 === 0 && w.K % 32 === 0;
}

/**
 * Scratch sizes for `rows` prefill rows and these weights (those that take matrix units), or null where none
 * does: x at the largest K, the weight at its largest shard and its f32 tiles (every split's) up to
 * MATRIX_SCRATCH_CAP_BYTES each, rows rounded up to whole tiles.
 */
export function matrixScratchBytes(
  gpu: Pick<Gpu, "info" | "profile">,
  rows: number,
  linears: readonly Linear[],
): { x: number; w: number; y: number } | null {
  const on = linears.filter((l) => usesMatrixUnits(gpu, l));
  if (!on.length) return null;
  const t = gpu.profile.matmul.tiled;
  const maxK = Math.max(...on.map((l) => l.K));
  const w = Math.max(...on.flatMap((l) => l.shards.map((s) => whole(s.n) * l.K * 2)));
  const y = Math.max(
    ...on.flatMap((l) =>
      l.shards.map((s) => matrixSplits(t, s.n, l.K).splits * whole(s.n) * whole(rows) * 4)
    ),
  );
  // At least one 128-row block of the longest K and its tiles.
  const cap = MATRIX_SCRATCH_CAP_BYTES;
  return {
    x: whole(rows) * maxK * 2,
    w: Math.max(128 * maxK * 2, Math.min(w, cap)),
    y: Math.max(t.splitK * 128 * whole(rows) * 4, Math.min(y, cap)),
  };
}

/**
 * K-splits of a matrix-unit matmul: narrow matrices (N < wideN) have too few 128×128 tiles to fill the GPU,
 * so their K is summed in `splitK` parts (k per part a multiple of 32). Depends on N and K only, never on M.
 */
export function matrixSplits(
  t: MatmulProfile["tiled"],
  N: number,
  K: number,
): { splits: number; kc: number } {
  const want = N < t.wideN ? Math.min(t.splitK, Math.floor(K / 32)) : 1;
  if (want < 2) return { splits: 1, kc: K };
  const kc = Math.ceil(K / want / 32) * 32;
  return { splits: Math.ceil(K / kc), kc };
}

/** x's rows [row0, row0 + M) as f16 into the scratch, once for all of a weight's shards. */
export async function rowsF16(ctx: OpContext, a: MatmulArgs, sc?: MatrixScratch): Promise<void> {
  const K = a.w.K;
  check(!!sc, "matmul", `${a.w.name}: matrix units need MatmulArgs.matrixScratch`);
  check(
    whole(a.M) * K * 2 <= sc!.x.size,
    "matmul",
    `${a.w.name}: ${a.M} rows of K=${K} exceed the f16 x scratch`,
  );
  check(128 * K * 2 <= sc!.w.size, "matmul", `${a.w.name}: K=${K} exceeds the f16 weight scratch`);
  await record(ctx, { file: "rows_f16.wgsl" }, {
    buffers: { x: a.x, out: sc!.x },
    params: { M: a.M, K, row0: a.row0 ?? 0 },
    grid: grid1d(Math.ceil((a.M * K) / 8 / 256)),
  });
}

/**
 * One weight shard on matrix units: blocks of its rows (as many as the scratches hold, a multiple of 128)
 * dequantized to f16 (by a pass into the scratch, or inside the GEMM for short steps), their 128×128 tiles
 * of f16 products accumulated in f32 (K in parts for narrow matrices), then matmul_splitk.wgsl sums the
 * parts in order with the epilogue.
 */
export async function tiledMatrix(ctx: OpContext, s: Shard, sc: MatrixScratch): Promise<void> {
  const { M, N, K } = s.params;
  const { SCALE_F16, OUT_F32, ADD, BIAS } = s.defines;
  const epilogue: Defines = {};
  if (OUT_F32) epilogue.OUT_F32 = 1;
  if (ADD) epilogue.ADD = 1;
  if (BIAS) epilogue.BIAS = 1;
  const t = ctx.gpu.profile.matmul.tiled;
  // Short steps dequantize inside the GEMM: a pass of its own costs as much at any M (bench/NOTES.md #127).
  const fused = M <= t.matrixFusedDequantMaxRows;
  const { splits, kc } = matrixSplits(t, N, K);
  const mp = whole(M);
  const block = Math.min(
    fused ? Infinity : Math.floor(sc.w.size / (2 * K * 128)),
    Math.floor(sc.y.size / (4 * splits * mp * 128)),
  ) * 128;
  check(block > 0, "matmul", `${M} rows of N=${N}, K=${K} exceed the matrix-unit scratch`);
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
    const weight = {
      w: n === N ? s.buffers.w : rowsOf(s.buffers.w, wordsPerRow * 4),
      scales: n === N ? s.buffers.scales : rowsOf(s.buffers.scales, scaleRow),
      biases: n === N ? s.buffers.biases : rowsOf(s.buffers.biases, scaleRow),
    };
    const scale: Defines = SCALE_F16 ? { SCALE_F16 } : {};
    const ldp = whole(n);
    const gemm = {
      params: { K, kc, mp, ldp },
      grid: [mp / 128, ldp / 128, splits] as [number, number, number],
    };
    if (fused) {
      await record(ctx, {
        file: "matmul_sgmat.wgsl",
        defines: { ...scale, FUSED_DEQUANT: 1 },
        overrides: s.overrides,
      }, { buffers: { a: sc.x, ...weight, part: sc.y }, ...gemm });
    } else {
      await record(ctx, { file: "dequant_f16.wgsl", defines: scale, overrides: s.overrides }, {
        buffers: { ...weight, out: sc.w },
        params: { N: n, K },
        grid: grid1d(Math.ceil((n * K) / 8 / 256)),
      });
      await record(ctx, { file: "matmul_sgmat.wgsl" }, {
        buffers: { a: sc.x, b: sc.w, part: sc.y },
        ...gemm,
      });
    }
    const buffers: Record<string, BufferResource> = { part: sc.y, y: s.buffers.y };
    if (s.buffers.bias) buffers.bias = n === N ? s.buffers.bias : rowsOf(s.buffers.bias, 4);
    await record(ctx, { file: "matmul_splitk.wgsl", defines: epilogue }, {
      buffers,
      params: {
        M,
        N: n,
        row0: s.params.row0,
        ldy: s.params.ldy,
        n_off: s.params.n_off + n0,
        splits,
        mp,
        ldp,
      },
      grid: [Math.ceil(n / 256), M, 1],
    });
  }
}
