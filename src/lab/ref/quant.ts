/**
 * Float64 decoding of every weight format the kernels read, written from the format definitions
 * (formats-and-architectures.md §1.2–1.3), not from the loader, so the lab also cross-checks the packers:
 *   MLX affine: w = scale·q + bias per group of GS values along K; row = one little-endian bit stream
 *               (bit b of element i is stream bit i·bits + b; stream bit s is bit s % 32 of word s / 32);
 *               scales/biases are 16-bit (f16 or bf16), two per u32, low half first.
 *   f16 / bf16: two values per u32, low half = element 0, rows contiguous.
 * @module
 */
import type { WeightFormat } from "../../ops/linear.ts";
import { type Half, halfAt } from "./half.ts";

/** The packed form of rows [0, n) of a weight matrix (one shard's buffers). */
export interface PackedWeights {
  w: Uint32Array;
  scales?: Uint32Array;
  biases?: Uint32Array;
}

/** Unsigned `bits`-bit value i of a little-endian bit stream that starts at word `base`. */
export function streamValue(words: Uint32Array, base: number, i: number, bits: number): number {
  let v = 0;
  for (let b = 0; b < bits; b++) {
    const s = i * bits + b;
    v |= ((words[base + (s >>> 5)] >>> (s & 31)) & 1) << b;
  }
  return v;
}

/** The 16-bit kind of a format's scales (quantized) or values (f16/bf16). */
export function halfKind(f: WeightFormat): Half {
  if (f.kind === "q") return f.scaleF16 ? "f16" : "bf16";
  return f.kind;
}

/** Weight row r (K values) as float64. */
export function dequantRow(
  f: WeightFormat,
  p: PackedWeights,
  r: number,
  K: number,
  out = new Float64Array(K),
): Float64Array {
  if (f.kind === "q") {
    const kind = halfKind(f);
    const base = (r * K * f.bits) / 32;
    const gpr = K / f.groupSize;
    for (let k = 0; k < K; k++) {
      const g = r * gpr + Math.floor(k / f.groupSize);
      out[k] = halfAt(p.scales!, g, kind) * streamValue(p.w, base, k, f.bits) + halfAt(p.biases!, g, kind);
    }
  } else {
    for (let k = 0; k < K; k++) out[k] = halfAt(p.w, r * K + k, f.kind);
  }
  return out;
}

/** The bias of each value's group in row r of a quantized weight (the `b` of w = s·q + b). */
export function groupBiasRow(
  f: WeightFormat,
  p: PackedWeights,
  r: number,
  K: number,
  out = new Float64Array(K),
): Float64Array {
  if (f.kind !== "q") throw new RangeError("groupBiasRow: not a quantized format");
  const gpr = K / f.groupSize;
  for (let k = 0; k < K; k++) out[k] = halfAt(p.biases!, r * gpr + Math.floor(k / f.groupSize), halfKind(f));
  return out;
}

/** Words of W, scales and biases for an (n, K) matrix (16-bit arrays padded to whole words). */
export function packedWords(f: WeightFormat, n: number, K: number): { w: number; groups: number } {
  if (f.kind === "q") return { w: (n * K * f.bits) / 32, groups: Math.ceil((n * K) / f.groupSize / 2) };
  return { w: Math.ceil((n * K) / 2), groups: 0 };
}

/** Bytes one pass over an (N, K) weight reads: values plus scales and biases. */
export function weightBytes(f: WeightFormat, N: number, K: number): number {
  if (f.kind === "q") return (N * K * f.bits) / 8 + (N * K / f.groupSize) * 4;
  return N * K * 2;
}

/** Parses "q4g64" / "f16" / "bf16" (scale dtype given apart). */
export function parseFormat(s: string, scale: Half = "bf16"): WeightFormat {
  if (s === "f16" || s === "bf16") return { kind: s };
  const m = /^q([0-9])g([0-9]+)$/.exec(s);
  if (!m) throw new Error(`weight format "${s}": expected q<bits>g<group> (e.g. q4g64), f16 or bf16`);
  return { kind: "q", bits: Number(m[1]), groupSize: Number(m[2]), scaleF16: scale === "f16" };
}
