/**
 * Float64 reference of the matmul family (matmul_vec.wgsl and matmul_tiled.wgsl compute the same thing):
 *   y[row0 + m, nOff + n] (=|+=) Σ_k x[row0 + m, k] · W[n, k] (+ bias[n])      m < M, n < N
 * W comes in shards of rows, each in its packed format; entries of y outside the written block keep their
 * initial values (so a stray write shows up as a mismatch).
 * @module
 */
import type { WeightFormat } from "../../ops/linear.ts";
import { dequantRow, type PackedWeights } from "./quant.ts";

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
  for (const n of cols) {
    const shard = a.shards.find((s) => n >= s.n0 && n < s.n0 + s.n)!;
    dequantRow(a.format, shard.packed, n - shard.n0, a.K, wrow);
    for (let m = 0; m < a.M; m++) {
      const xb = (a.row0 + m) * a.K;
      let acc = 0;
      for (let k = 0; k < a.K; k++) acc += a.x[xb + k] * wrow[k];
      if (a.bias) acc += a.bias[n];
      const yi = (a.row0 + m) * a.ldy + a.nOff + n;
      y[yi] = a.out === "add" ? a.y0[yi] + acc : acc;
    }
  }
  return y;
}
