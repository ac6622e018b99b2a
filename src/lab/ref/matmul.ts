/**
 * Float64 reference of the matmul family (matmul_vec.wgsl and matmul_tiled.wgsl compute the same thing):
 *   y[row0 + m, nOff + n] (=|+=) Σ_k x[row0 + m, k] · W[n, k] (+ bias[n])      m < M, n < N
 * W comes in shards of rows, each in its packed format; entries of y outside the written block keep their
 * initial values (so a stray write shows up as a mismatch).
 * @module
 */
import type { WeightFormat } from "../../ops/linear.ts";
import { roundHalf } from "./half.ts";
import { dequantRow, groupBiasRow, type PackedWeights } from "./quant.ts";

export interface MatmulRef {
  /** (rows, K) activations as the kernel sees them (already rounded to the act dtype). */
  x: Float64Array;
  M: number;
  N: number;
  K: number;
  row0: number;
  ldy: number;
  nOff: number;
  format: WeightFormat;
  shards: { n0: number; n: number; packed: PackedWeights }[];
  /** (N) f32 values, or none. */
  bias?: Float64Array;
  out: "act" | "f32" | "add";
  /** (rows, ldy): y before the kernel runs. */
  y0: Float64Array;
  /** Compute only these columns n (big shapes in the CLI); the others are NaN, i.e. not checked. */
  cols?: number[];
  /** x is quantized to int8 per 32 values as lib/x8.wgsl does (4-bit weights, int8-x kernels). */
  x8?: boolean;
  /** x and each dequantized weight rounded to f16 (matrix units: matmul_sgmat.wgsl stages both so). */
  f16Operands?: boolean;
}

/** Round half to even (WGSL `round`). */
function roundEven(v: number): number {
  const r = Math.round(v);
  return Math.abs(v % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/**
 * x as lib/x8.wgsl quantizes it: per g values (32) sx = max|x| / 127 and q = round(x · 127 / max)
 * in ±127. Returns x̃ = sx·q and, per g values, Σx − Σx̃: the kernel adds bias·Σx (exact sums), so a weight
 * w = s·q_w + b contributes s·Σ q_w·x̃ + b·Σx = Σ w·x̃ + b·(Σx − Σx̃).
 */
export function quantizeX8(x: Float64Array, g = 32): { xt: Float64Array; corr: Float64Array } {
  const xt = new Float64Array(x.length);
  const corr = new Float64Array(Math.ceil(x.length / g));
  for (let c = 0; c < corr.length; c++) {
    let mx = 0;
    for (let k = c * g; k < (c + 1) * g; k++) mx = Math.max(mx, Math.abs(x[k]));
    for (let k = c * g; k < (c + 1) * g; k++) {
      const q = mx > 0 ? Math.min(127, Math.max(-127, roundEven((x[k] * 127) / mx))) : 0;
      xt[k] = (mx / 127) * q;
      corr[c] += x[k] - xt[k];
    }
  }
  return { xt, corr };
}

export function matmulRef(a: MatmulRef): Float64Array {
  const y = Float64Array.from(a.y0);
  const cols = a.cols ?? Array.from({ length: a.N }, (_, n) => n);
  const wrow = new Float64Array(a.K);
  if (a.cols) {
    const keep = new Set(a.cols);
    for (let m = 0; m < a.M; m++) {
      for (let n = 0; n < a.N; n++) if (!keep.has(n)) y[(a.row0 + m) * a.ldy + a.nOff + n] = NaN;
    }
  }
  const brow = new Float64Array(a.K);
  const g = 32;
  const q8 = a.x8
    ? Array.from(
      { length: a.M },
      (_, m) => quantizeX8(a.x.subarray((a.row0 + m) * a.K, (a.row0 + m + 1) * a.K), g),
    )
    : [];
  for (const n of cols) {
    const shard = a.shards.find((s) => n >= s.n0 && n < s.n0 + s.n)!;
    dequantRow(a.format, shard.packed, n - shard.n0, a.K, wrow);
    if (a.f16Operands) { for (let k = 0; k < a.K; k++) wrow[k] = roundHalf(Math.fround(wrow[k]), "f16"); }
    if (a.x8) groupBiasRow(a.format, shard.packed, n - shard.n0, a.K, brow);
    for (let m = 0; m < a.M; m++) {
      const xb = (a.row0 + m) * a.K;
      let acc = 0;
      if (a.x8) {
        const { xt, corr } = q8[m];
        for (let k = 0; k < a.K; k++) acc += xt[k] * wrow[k];
        for (let c = 0; c < corr.length; c++) acc += brow[c * g] * corr[c];
      } else if (a.f16Operands) {
        for (let k = 0; k < a.K; k++) acc += roundHalf(a.x[xb + k], "f16") * wrow[k];
      } else {
        for (let k = 0; k < a.K; k++) acc += a.x[xb + k] * wrow[k];
      }
      if (a.bias) acc += a.bias[n];
      const yi = (a.row0 + m) * a.ldy + a.nOff + n;
      y[yi] = a.out === "add" ? a.y0[yi] + acc : acc;
    }
  }
  return y;
}
