/**
 * Float64 reference of embed.wgsl: x[r, :] = dequant(table[token_r, :]) for every step row, the table held
 * in row shards (each shard's dispatch writes only the rows whose token it holds).
 * @module
 */
import type { WeightFormat } from "../../ops/linear.ts";
import { dequantRow, type PackedWeights } from "./quant.ts";

export function embedRef(a: {
  tokens: ArrayLike<number>;
  H: number;
  format: WeightFormat;
  shards: { n0: number; n: number; packed: PackedWeights }[];
  /** (R, H) f32 before the kernel: rows whose token no shard holds keep these values. */
  x0: Float64Array;
  /** Multiplies every embedding (default 1). */
  scale?: number;
}): Float64Array {
  const x = Float64Array.from(a.x0);
  const row = new Float64Array(a.H);
  for (let r = 0; r < a.tokens.length; r++) {
    const t = a.tokens[r];
    const s = a.shards.find((s) => t >= s.n0 && t < s.n0 + s.n);
    if (!s) continue;
    dequantRow(a.format, s.packed, t - s.n0, a.H, row);
    x.set(row.map((v) => v * (a.scale ?? 1)), r * a.H);
  }
  return x;
}
