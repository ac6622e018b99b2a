/**
 * Lab cases of the matmul family: `matmul_vec.wgsl` (decode rows) and `matmul_tiled.wgsl` (prefill
 * chunks), run through `matmul()` in src/ops/matmul.ts with every weight format and epilogue.
 * @module
 */
import type { Gpu } from "../../gpu/device.ts";
import { ShapeError } from "../../errors.ts";
import type { WeightFormat } from "../../ops/linear.ts";
import { matmul, splitKRows, usesInt8X, usesMatrixUnits } from "../../ops/matmul.ts";
import { matrixScratchBytes } from "../../ops/matmul_matrix.ts";
import { type CaseInputs, compareAll, int, type KernelCase, oneOf, type Shape } from "../case.ts";
import type { Tolerance } from "../compare.ts";
import { type Bound, BufferSet, readAct, readF32, seal } from "../harness.ts";
import { actBytesOf, type ActDtype, encodeAct, roundAct } from "../ref/half.ts";
import { matmulRef } from "../ref/matmul.ts";
import { rmsNormRef } from "../ref/norm.ts";
import { siluMulRef } from "../ref/elementwise.ts";
import { parseFormat, weightBytes } from "../ref/quant.ts";
import type { Rng } from "../rng.ts";
import { checkFormat, randomWeights, type ShardData, uploadLinear } from "./weights.ts";

export type Epilogue = "act" | "f32" | "add" | "swiglu";

export interface MatmulInputs extends CaseInputs {
  mode: "vec" | "tiled";
  M: number;
  N: number;
  K: number;
  row0: number;
  ldy: number;
  nOff: number;
  out: Epilogue;
  format: WeightFormat;
  /** (row0 + M, K) f32 values (matmul inputs are f32 on both paths). */
  x: Float64Array;
  shards: ShardData[];
  bias?: Float64Array;
  /** (K) RMSNorm weight when the norm is fused (vector mode, shape key norm = 1). */
  gamma?: Float64Array;
  eps: number;
  /** (row0 + M, ldy) initial y, in the output dtype. */
  y0: Float64Array;
  /** Columns the reference computes (all when absent). */
  cols?: number[];
  /** The kernel took int8 x (set when bound: it depends on the device, see `usesInt8X`). */
  x8?: boolean;
  /** The tiled matmul ran on matrix units (x and W as f16). */
  mx?: boolean;
}

/** Reference work (multiply-adds) above which only a sample of columns is checked. */
const FULL_CHECK_MACS = 2 ** 27;

/** Random inputs for a matmul shape (exported for batch-invariance tests that rebind the same data). */
export function makeMatmul(
  mode: "vec" | "tiled",
  shape: Shape,
  rng: Rng,
  env: { act: ActDtype; maxBinding: number },
): MatmulInputs {
  const M = int(shape, "M"), N = int(shape, "N"), K = int(shape, "K");
  const row0 = int(shape, "row0", 0), nOff = int(shape, "noff", 0), pad = int(shape, "pad", 0);
  const out = oneOf(shape, "out", ["act", "f32", "add", "swiglu"] as const);
  const format = parseFormat(String(shape.w), oneOf(shape, "scale", ["f16", "bf16"] as const));
  checkFormat(format, K, `${mode} matmul`);
  if (format.kind !== "q" && K % 8 !== 0) {
    throw new ShapeError(`matmul: K=${K} must be a multiple of 8 for 16-bit weights`);
  }
  if (
    out === "swiglu" && (mode !== "vec" || format.kind !== "q" || format.bits !== 4 || N % 2 || shape.bias)
  ) {
    throw new ShapeError("matmul: out = swiglu needs vector mode, 4-bit weights, an even N and no bias");
  }
  // swiglu writes h = silu(gate)·up: N/2 columns.
  const ldy = nOff + (out === "swiglu" ? N / 2 : N) + pad;
  const rows = row0 + M;
  const x = new Float64Array(rows * K);
  for (let i = 0; i < x.length; i++) x[i] = Math.fround(rng.signed(1));
  // |W| ≲ √(3/K) keeps every output O(1) whatever K is, so one tolerance fits all shapes.
  const shards = randomWeights(rng, format, N, K, {
    amp: Math.sqrt(3 / K),
    minShards: int(shape, "shards"),
    maxBinding: env.maxBinding,
  });
  const bias = shape.bias ? Float64Array.from({ length: N }, () => Math.fround(rng.signed(0.5))) : undefined;
  if (shape.norm && mode !== "vec") {
    throw new ShapeError("matmul: norm = 1 (fused RMSNorm) is a vector-mode option");
  }
  // Norm weights around 1 with a real spread; the residual rows get a scale far from 1 so the norm matters.
  const gamma = shape.norm
    ? Float64Array.from({ length: K }, () => Math.fround(1 + rng.signed(0.5)))
    : undefined;
  if (gamma) { for (let i = 0; i < x.length; i++) x[i] = Math.fround(x[i] * 7.5); }
  const yAct: ActDtype = out === "act" ? env.act : "f32";
  const y0 = Float64Array.from({ length: rows * ldy }, () => roundAct(rng.signed(1), yAct));
  let cols: number[] | undefined;
  if (M * N * K > FULL_CHECK_MACS) {
    const want = Math.max(8, Math.floor(FULL_CHECK_MACS / (M * K)));
    const set = new Set<number>([0, N - 1, ...shards.flatMap((s) => [s.n0, s.n0 + s.n - 1])]);
    while (set.size < Math.min(want, N)) set.add(rng.int(0, N));
    cols = [...set].sort((a, b) => a - b);
  }
  return {
    shape,
    act: env.act,
    mode,
    M,
    N,
    K,
    row0,
    ldy,
    nOff,
    out,
    format,
    x,
    shards,
    bias,
    gamma,
    eps: 1e-6,
    y0,
    cols,
  };
}

/**
 * Uploads `i` and records its matmul; `parts` instead records one matmul per {M, row0} block over the same
 * buffers (batch-invariance tests compare a row computed alone with the same row inside a larger M).
 */
export async function bindMatmul(
  gpu: Gpu,
  i: MatmulInputs,
  parts?: { M: number; row0: number }[],
): Promise<Bound> {
  // x8 = 1 takes int8 x for 4-bit weights at any size (the engine only from int8MinWeights weights up, so the
  // small lab shapes would never reach it); x8 = 0 keeps the f32-x kernels. Both stay tested. splitk > 0 sets
  // the K-splits of narrow int8-x tiled matmuls (0: the profile's).
  const x8 = i.shape.x8 !== 0;
  const mx = Number(i.shape.mx ?? 0) === 1;
  const sk = Number(i.shape.splitk ?? 0);
  const dequant = String(i.shape.dequant ?? "profile");
  if (!["profile", "pass", "fused"].includes(dequant)) {
    throw new ShapeError(`matmul: dequant=${dequant}: profile, pass or fused`);
  }
  const g = gpu.withProfile({
    matmul: {
      int8MinWeights: 0,
      vectorInt8: { enabled: x8 },
      tiled: {
        int8: x8,
        matrixUnits: mx,
        ...(sk > 0 ? { splitK: sk } : {}),
        ...(dequant !== "profile" ? { matrixFusedDequantMaxRows: dequant === "fused" ? Infinity : 0 } : {}),
      },
    },
  });
  const set = new BufferSet(g);
  const yAct: ActDtype = i.out === "act" ? i.act : "f32";
  const x = set.upload("x", Float32Array.from(i.x));
  const w = uploadLinear(set, "w", i.format, i.N, i.K, i.shards, i.bias);
  const y = set.upload("y", encodeAct(i.y0, yAct), { mutable: i.out === "add" });
  const norm = i.gamma ? { weight: set.upload("gamma", Float32Array.from(i.gamma)), eps: i.eps } : undefined;
  const ctx = set.context();
  i.mx = i.mode === "tiled" && usesMatrixUnits(g, w);
  if (mx && !i.mx) {
    throw new ShapeError(
      "matmul: mx=1 (matrix units) takes 4- or 8-bit weights, tiled, on a device with f16 16×16×16 " +
        "subgroup matrices (Dawn: --webgpu dawn)",
    );
  }
  i.x8 = !i.mx && usesInt8X(g, { format: i.format, K: i.K, N: i.N }, i.mode);
  // The split-K scratch is sized for all of the case's rows by the engine's rule (splitKRows), NaN-filled so
  // an unwritten partial that were read would show.
  const rows = i.row0 + i.M;
  const kRows = i.mode === "tiled" ? splitKRows(g.profile, rows) : 0;
  const splitK = kRows ? { buffer: set.scratch("splitk", kRows * i.N * 4), rows } : undefined;
  // The matrix units' scratches by the engine's rule, NaN-filled like split-K's (rows past M or N there
  // must never reach y).
  const mxBytes = i.mx ? matrixScratchBytes(g, rows, [w])! : null;
  const block = Number(i.shape.mxblock ?? 0);
  if (block % 128) throw new ShapeError("matmul: mxblock must be a multiple of 128");
  const matrixScratch = mxBytes
    ? {
      x: set.scratch("matrix_x", mxBytes.x),
      w: set.scratch("matrix_w", block ? block * i.K * 2 : mxBytes.w),
      y: set.scratch("matrix_y", mxBytes.y),
    }
    : undefined;
  for (const p of parts ?? [{ M: i.M, row0: i.row0 }]) {
    await matmul(ctx, {
      x,
      w,
      y,
      M: p.M,
      out: i.out,
      mode: i.mode,
      row0: p.row0,
      ldy: i.ldy,
      nOff: i.nOff,
      norm,
      splitK,
      matrixScratch,
    });
  }
  const n = i.y0.length;
  return seal(set, ctx, { maxKvLen: 1 }, async () => ({
    y: yAct === "f32" ? await readF32(gpu, y, n) : await readAct(gpu, y, n, i.act),
  }));
}

/**
 * Tolerances. f32 outputs: the kernels accumulate in f32 (error grows like √K·2^-24 on O(1) outputs).
 * act outputs on the f16 path add the final rounding to f16 (relative 2^-11). Matrix units: below.
 */
export function matmulTolerance(shape: Shape, act: ActDtype): Record<string, Tolerance> {
  const K = Number(shape.K);
  // Matrix units: operands rounded to f16 as the reference does, but a weight's f32 → f16 rounding may
  // differ from float64's by an ulp at ties, and the units' f32 sums are not IEEE-ordered.
  const mx = Number(shape.mx ?? 0) === 1;
  const f32: Tolerance = mx ? { atol: 1e-5 * Math.sqrt(K) + 1e-4, rtol: 2e-3 } : {
    atol: 2e-7 * Math.sqrt(K) + 1e-6,
    rtol: 1e-5,
  };
  const f16: Tolerance = { atol: f32.atol + 1e-5, rtol: f32.rtol + 1e-3 };
  return { y: shape.out === "act" && act === "f16" ? f16 : f32 };
}

/** The format and epilogue switches both shapes start from (4-bit g64 with bf16 scales, plain output). */
const SWITCHES = {
  norm: 0,
  w: "q4g64",
  scale: "bf16",
  out: "act",
  bias: 0,
  shards: 1,
  row0: 0,
  noff: 0,
  pad: 0,
  x8: 1,
  splitk: 0,
  mx: 0,
  mxblock: 0,
  dequant: "profile",
};

const KEYS = {
  M: "rows (decode rows for vec, a prefill chunk for tiled)",
  N: "output columns",
  K: "reduction length",
  w: "weight format: q<bits>g<group> (bits 2,3,4,5,6,8; group 32,64,128), f16 or bf16",
  scale: "scale/bias dtype of quantized weights: f16 or bf16",
  out: "epilogue: act (y act), f32 (y f32), add (y f32 += result, the residual add), " +
    "swiglu (W = [gate|up], y f32 = silu(gate)·up; vec, 4-bit)",
  bias: "1: add a real bias (Qwen2 q/k/v)",
  shards: "minimum row shards of W (more when a shard would pass the binding limit)",
  norm: "1: RMS-normalise each x row (· a random weight) inside the kernel (vector mode; decode rows)",
  row0: "first row of x and y",
  noff: "first column of y written",
  pad: "extra columns of y after the written block (ldy = noff + N + pad)",
  x8: "1: 4-bit matmuls quantize x to int8 whatever the size (the engine: from 4M weights); 0: keep f32 x",
  mx: "1: tiled 4/8-bit matmuls on matrix units where the device offers them (Dawn; x and W as f16)",
  mxblock: "matrix units: weight rows per dequantized block, a multiple of 128 (0: the engine's rule)",
  dequant:
    "matrix units: weights to f16 in a pass of their own or fused into the GEMM (profile: the profile's)",
  splitk: "K-splits of narrow (N < 4096) int8-x or matrix-unit tiled matmuls, summed by matmul_splitk.wgsl " +
    "(0: the profile's)",
};

/**
 * The vector case, the tiled one, or the tiled one on matmul_tiled_x8.wgsl (int8 x by default), alone or
 * (splitk) split along K and summed by matmul_splitk.wgsl.
 */
function matmulCase(
  mode: "vec" | "tiled",
  variant: "" | "x8" | "splitk" | "mx" = "",
): KernelCase<MatmulInputs> {
  // The tiled case keeps f32 x (its file is matmul_tiled.wgsl); the x8 kernels' own cases start with int8 x.
  const x8 = mode === "vec" || (variant && variant !== "mx") ? 1 : 0;
  const mx = variant === "mx" ? 1 : 0;
  const splitk = variant === "splitk" ? 2 : 0;
  // Qwen3-4B fused gate|up projection: N = 2·9728, K = 2560; split-K: down_proj, N = 2560, K = 9728.
  const [N, K] = splitk ? [2560, 9728] : [19456, 2560];
  return {
    files: mode === "vec" ? ["matmul_vec.wgsl", "matmul_vec_q4.wgsl", "matmul_vec_q4x8.wgsl"] : [
      {
        "": "matmul_tiled.wgsl",
        x8: "matmul_tiled_x8.wgsl",
        splitk: "matmul_splitk.wgsl",
        mx: "matmul_sgmat.wgsl",
      }[variant],
      ...(variant === "mx" ? ["dequant_f16.wgsl", "rows_f16.wgsl"] : []),
    ],
    summary: mode === "vec"
      ? "y (=|+=) x·Wᵀ for few rows: weights streamed once for all rows (decode)"
      : variant === "x8"
      ? "y (=|+=) x·Wᵀ for many rows, 4-bit W on int8 x by integer dot products, 64×128 tiles (prefill)"
      : variant === "mx"
      ? "y (=|+=) x·Wᵀ for many rows on matrix units (Dawn's subgroup matrices): x and the 4/8-bit W " +
        "converted to f16, then 128×128 tiles (prefill)"
      : variant === "splitk"
      ? "the int8-x tiled matmul split along K (partials), " +
        "then the partials summed in order with the epilogue"
      : "y (=|+=) x·Wᵀ for many rows, 64×64 tiles (prefill)",
    defaults: { M: mode === "vec" ? 1 : 512, N, K, ...SWITCHES, x8, splitk, mx },
    small: { M: mode === "vec" ? 5 : 67, N: 67, K: 320, ...SWITCHES, x8, splitk, mx },
    keys: KEYS,
    make: (shape, rng, env) => makeMatmul(mode, shape, rng, env),
    bind: (gpu, i) => bindMatmul(gpu, i),
    check: (got, i) => compareAll(got, { y: reference(i) }, matmulTolerance(i.shape, i.act)),
    tolerance: matmulTolerance,
    cost(shape, act) {
      const M = Number(shape.M), N = Number(shape.N), K = Number(shape.K);
      const f = parseFormat(String(shape.w));
      const yb = shape.out === "act" ? actBytesOf(act) : 4;
      return {
        bytes: weightBytes(f, N, K) + M * K * 4 + M * N * yb * (shape.out === "add" ? 2 : 1) +
          (shape.bias ? N * 4 : 0),
        flops: 2 * M * N * K,
        int8: Number(shape.x8) === 1 && f.kind === "q" && f.bits === 4,
      };
    },
  };
}

/**
 * Expected y: the matmul of the (normalised) rows, or its SwiGLU h = silu(gate)·up of the [gate | up] result.
 */
function reference(i: MatmulInputs): Float64Array {
  const x = normedRows(i);
  if (i.out !== "swiglu") return matmulRef({ ...i, out: i.out, x, f16Operands: i.mx });
  const rows = i.row0 + i.M;
  const full = matmulRef({
    ...i,
    x,
    out: "f32",
    ldy: i.N,
    nOff: 0,
    y0: new Float64Array(rows * i.N),
    cols: undefined,
    x8: i.x8,
  });
  const h = siluMulRef(full.subarray(i.row0 * i.N), i.M, i.N / 2);
  const y = Float64Array.from(i.y0);
  for (let m = 0; m < i.M; m++) {
    y.set(h.subarray(m * i.N / 2, (m + 1) * i.N / 2), (i.row0 + m) * i.ldy + i.nOff);
  }
  return y;
}

/** x as the matmul sees it: with a fused norm, rows row0..row0+M normalised in float64. */
function normedRows(i: MatmulInputs): Float64Array {
  if (!i.gamma) return i.x;
  const x = Float64Array.from(i.x);
  const b = i.row0 * i.K;
  x.set(rmsNormRef({ x: i.x.subarray(b, b + i.M * i.K), weight: i.gamma, R: i.M, H: i.K, eps: i.eps }), b);
  return x;
}

export const matmulVecCase: KernelCase<MatmulInputs> = matmulCase("vec");
export const matmulTiledCase: KernelCase<MatmulInputs> = matmulCase("tiled");
export const matmulTiledX8Case: KernelCase<MatmulInputs> = matmulCase("tiled", "x8");
export const matmulSplitKCase: KernelCase<MatmulInputs> = matmulCase("tiled", "splitk");
export const matmulSgmatCase: KernelCase<MatmulInputs> = matmulCase("tiled", "mx");
