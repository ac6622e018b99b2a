/**
 * Float64 reference of rope.wgsl: per-head RMS norm (Qwen3 q_norm/k_norm), rotate-half RoPE over the first
 * `rot` dims with the mscale factor, Q out, and K/V written into the paged cache at (slot, pos).
 *   pairs (i, i + rot/2), i < rot/2:  o_i = (x_i cos θ − x_{i+rot/2} sin θ)·mscale,
 *                                     o_{i+rot/2} = (x_{i+rot/2} cos θ + x_i sin θ)·mscale,
 *                                     θ = pos·inv_freq[i]
 * The angle is formed in f32 (fround(pos·inv_freq)), as HF and MLX do; everything after it in float64.
 * @module
 */
import { kvOffset, type PagedKv, type Row } from "./paged.ts";

export interface RopeRef extends PagedKv {
  rows: Row[];
  /** (R, (nq + 2·nkv)·hd) */
  qkv: Float64Array;
  /** (rot/2) f32 values */
  invFreq: Float64Array;
  qn?: Float64Array;
  kn?: Float64Array;
  nq: number;
  rot: number;
  eps: number;
  mscale: number;
  /** The pool before the kernel runs. */
  kv0: Float64Array;
  /** Rows to process (default all); the others' q stays 0 and their K/V are not written. */
  which?: number[];
}

export function ropeRef(a: RopeRef): { q: Float64Array; kv: Float64Array } {
  const { nq, nkv, hd, rot } = a;
  const width = (nq + 2 * nkv) * hd;
  const q = new Float64Array(a.rows.length * nq * hd);
  const kv = Float64Array.from(a.kv0);
  const half = rot / 2;
  const head = new Float64Array(hd);
  a.rows.forEach((row, r) => {
    if (a.which && !a.which.includes(r)) return;
    for (let h = 0; h < nq + nkv; h++) {
      const isQ = h < nq;
      const src = r * width + h * hd;
      for (let d = 0; d < hd; d++) head[d] = a.qkv[src + d];
      const w = isQ ? a.qn : a.kn;
      if (w) {
        let ss = 0;
        for (let d = 0; d < hd; d++) ss += head[d] * head[d];
        const inv = 1 / Math.sqrt(ss / hd + a.eps);
        for (let d = 0; d < hd; d++) head[d] *= inv * w[d];
      }
      const o = Float64Array.from(head);
      for (let i = 0; i < half; i++) {
        const th = Math.fround(row.pos * a.invFreq[i]);
        const c = Math.cos(th), s = Math.sin(th);
        o[i] = (head[i] * c - head[i + half] * s) * a.mscale;
        o[i + half] = (head[i + half] * c + head[i] * s) * a.mscale;
      }
      if (isQ) q.set(o, (r * nq + h) * hd);
      else {
        const kh = h - nq;
        kv.set(o, kvOffset(a, row.slot, row.pos, 0, kh));
        const v = a.qkv.subarray(r * width + (nq + nkv + kh) * hd, r * width + (nq + nkv + kh + 1) * hd);
        kv.set(v, kvOffset(a, row.slot, row.pos, 1, kh));
      }
    }
  });
  return { q, kv };
}

/** inv_freq[i] = theta^(−2i/rot), rounded to f32 (the table the engine uploads for plain RoPE). */
export function ropeInvFreq(theta: number, rot: number): Float64Array {
  return Float64Array.from({ length: rot / 2 }, (_, i) => Math.fround(theta ** (-(2 * i) / rot)));
}
