/**
 * Float64 reference of attention over the paged cache, causal, with GQA (kv head j serves query heads
 * [j·G, (j+1)·G)). Decode (attention_decode + attention_combine) and prefill (attention_prefill) compute
 * the same function of (q, cache, pos); they differ only in which rows they take:
 *   out[r, qh, :] = Σ_{j ≤ pos_r} softmax_j(scale · q[r, qh]·K[slot_r, j, qh/G]) · V[slot_r, j, qh/G]
 * With a sliding window W the sum (and the softmax) runs over pos_r − W < j ≤ pos_r only (HF Gemma3's
 * `sliding_window`: key j is visible iff pos_r − j < W).
 * Rows not in `which` keep their values from `out0`.
 * @module
 */
import { roundHalf } from "./half.ts";
import { kvOffset, type PagedKv, type Row } from "./paged.ts";

export interface AttentionRef extends PagedKv {
  rows: Row[];
  /** Step rows to compute. */
  which: number[];
  /** (R, nq·hd) */
  q: Float64Array;
  /** The pool (pages, 2, nkv, ps, hd). */
  kv: Float64Array;
  nq: number;
  scale: number;
  /** (R, nq·hd) before the kernel. */
  out0: Float64Array;
  /** If given, (R, nq·hd): each computed output's softmax-weighted mean of |v| (a rounding bound's scale). */
  absOut?: Float64Array;
  /**
   * Scores as prefill's F16_QK computes them (attention_prefill_quad.wgsl): q·scale rounded to f16, each 8
   * dims of q·k one chain of f16 fused multiply-adds in dim order (each exact here, then rounded to f16), the
   * chains summed (f32 there: its rounding is left out).
   */
  qkF16?: boolean;
  /** Sliding window (keys per query, its own included); 0 or absent: full causal. */
  window?: number;
}

/** q·k as F16_QK sums it: chains of eight f16 fused multiply-adds over q16 (q·scale rounded to f16). */
function dotF16(q16: Float64Array, k: Float64Array, kb: number): number {
  let s = 0;
  for (let c = 0; c < q16.length; c += 8) {
    let acc = 0;
    for (let d = c; d < c + 8; d++) acc = roundHalf(q16[d] * k[kb + d] + acc, "f16");
    s += acc;
  }
  return s;
}

export function attentionRef(a: AttentionRef): Float64Array {
  const { nq, nkv, hd } = a;
  const G = nq / nkv;
  const out = Float64Array.from(a.out0);
  for (const r of a.which) {
    const row = a.rows[r];
    const len = row.pos + 1;
    // Keys before j0 lie outside the window: not in the softmax at all.
    const j0 = a.window ? Math.max(0, len - a.window) : 0;
    const s = new Float64Array(len);
    for (let qh = 0; qh < nq; qh++) {
      const h = Math.floor(qh / G);
      const qb = (r * nq + qh) * hd;
      let mx = -Infinity;
      // F16_QK's q·scale in f16, once per vector.
      const q16 = a.qkF16
        ? a.q.slice(qb, qb + hd).map((x) => roundHalf(Math.fround(x * a.scale), "f16"))
        : null;
      for (let j = j0; j < len; j++) {
        const kb = kvOffset(a, row.slot, j, 0, h);
        if (q16) s[j] = dotF16(q16, a.kv, kb);
        else {
          let dot = 0;
          for (let d = 0; d < hd; d++) dot += a.q[qb + d] * a.kv[kb + d];
          s[j] = dot * a.scale;
        }
        if (s[j] > mx) mx = s[j];
      }
      let l = 0;
      for (let j = j0; j < len; j++) l += s[j] = Math.exp(s[j] - mx);
      const o = new Float64Array(hd);
      const oa = a.absOut ? new Float64Array(hd) : null;
      for (let j = j0; j < len; j++) {
        const vb = kvOffset(a, row.slot, j, 1, h);
        for (let d = 0; d < hd; d++) o[d] += s[j] * a.kv[vb + d];
        if (oa) { for (let d = 0; d < hd; d++) oa[d] += s[j] * Math.abs(a.kv[vb + d]); }
      }
      for (let d = 0; d < hd; d++) out[qb + d] = o[d] / l;
      if (oa) { for (let d = 0; d < hd; d++) a.absOut![qb + d] = oa[d] / l; }
    }
  }
  return out;
}
