/**
 * Lab cases of attention over the paged cache, the part both cases share: their inputs, the reference (with
 * the fused RoPE's work on q and the pool, and qk8's quantized queries) and the tolerances. The cases are
 * split-K decode (attention_decode.ts: `attention_decode.wgsl` then `attention_combine.wgsl`, recorded
 * together by `attentionDecode()`) and tiled prefill (attention_prefill.ts: `attention_prefill.wgsl` via
 * `attentionPrefill()`), both in src/ops/attention.ts.
 * @module
 */
import { ShapeError } from "../../errors.ts";
import { type CaseInputs, int } from "../case.ts";
import type { Tolerance } from "../compare.ts";
import { type ActDtype, roundAct } from "../ref/half.ts";
import { attentionRef } from "../ref/attention.ts";
import { quantizeKv8 } from "../ref/kv8.ts";
import { ropeRef } from "../ref/rope.ts";
import type { Row } from "../ref/paged.ts";
import type { Rng } from "../rng.ts";
import { kv8Tolerance, type Pool, quantizeWritten, writtenRows } from "./paged.ts";

export interface AttentionInputs extends CaseInputs {
  mode: "decode" | "prefill";
  rows: Row[];
  /** Rows the kernel computes. */
  which: number[];
  row0: number;
  nq: number;
  scale: number;
  q: Float64Array;
  pool: Pool;
  out0: Float64Array;
  /** Sliding window (keys per query, its own included; the `window` shape key); 0: full causal. */
  window: number;
  /** Decode with `rope`: q is computed in the kernel from this raw QKV projection (src/lab/ref/rope.ts). */
  rope?: {
    qkv: Float64Array;
    invFreq: Float64Array;
    qn?: Float64Array;
    kn?: Float64Array;
    rot: number;
    eps: number;
    mscale: number;
  };
}

/**
 * Output f32 on both paths (it feeds o_proj). f32: scores, exponentials and sums in f32 over up to a few
 * thousand keys. f16: Q/K/V are exact f16 inputs; prefill rounds q·scale to f16 (2^-11 on every score).
 * q8 (`kv8`): `out` keeps the act tolerance, as the kernels dequantize to the reference's own f32 values
 * (code · scale). The K/V cells the fused RoPE path writes: their codes exactly, but for a value the
 * kernel's f32 error can take across a rounding boundary (either code; quantizeWritten in paged.ts), and
 * scales to a few f32 ulp plus that error (kv8Tolerance). check() takes the largest block max written;
 * the nominal bound here takes 4.5, about the largest |K| the inputs give (RMS-normed U(±2) heads, norm
 * weights ≤ 1.5, a rotated pair, mscale 1.13).
 */
export function tolerance(act: ActDtype, kv8 = false): Record<string, Tolerance> {
  return {
    out: act === "f16" ? { atol: 5e-4, rtol: 2e-3 } : { atol: 2e-6, rtol: 1e-4 },
    // The K/V cells the fused RoPE path writes: rope.wgsl's tolerance (tests/ops/rope_test.ts).
    kv: kv8 ? kv8Tolerance(4.5) : act === "f16" ? { atol: 1e-5, rtol: 1e-3 } : { atol: 1e-6, rtol: 2e-6 },
  };
}

export function heads(shape: Record<string, number | string>): { nq: number; nkv: number; hd: number } {
  const nq = int(shape, "nq"), nkv = int(shape, "nkv"), hd = int(shape, "hd");
  if (nq % nkv !== 0) throw new ShapeError(`attention: nq=${nq} is not a multiple of nkv=${nkv}`);
  return { nq, nkv, hd };
}

/**
 * Queries U(±4) against keys U(±1) give scores (after hd^-½) with a std of about 1.3: a peaked softmax (a
 * flat one would hide errors) that still mixes many keys.
 */
export function queries(rng: Rng, n: number, act: ActDtype): Float64Array {
  const amp = 4;
  return Float64Array.from({ length: n }, () => roundAct(rng.signed(amp), act));
}

/** With `on`, query head h's values times 2^(h mod 5 − 2) (exact in f16: a power of two). */
export function spread(q: Float64Array, nq: number, hd: number, on: number, act: ActDtype): Float64Array {
  if (!on) return q;
  return q.map((x, e) => roundAct(x * 2 ** ((Math.floor(e / hd) % nq) % 5 - 2), act));
}

/** Reference work (multiply-adds) above which only a sample of rows is checked (big CLI shapes). */
const FULL_CHECK_MACS = 2 ** 28;

/**
 * With `rope`, the q rows and the pool after rope.wgsl's work on the decode rows (q rounded to act, as the
 * kernel keeps it; q8: the new K/V rows quantized, taking the code nearer the GPU's pool `got` where
 * either is right, and `kvTol` the pool's tolerance); otherwise the inputs as they are.
 */
export function roped(
  i: AttentionInputs,
  got?: Float64Array,
): { q: Float64Array; kv: Float64Array; kvTol?: Tolerance } {
  if (!i.rope) return { q: i.q, kv: i.pool.kv };
  const r = ropeRef({ ...i.pool, ...i.rope, rows: i.rows, nq: i.nq, kv0: i.pool.kv, which: i.which });
  const q = r.q.map((v) => roundAct(v, i.act));
  if (!i.pool.q8) return { q, kv: r.kv };
  const w = quantizeWritten(r.kv, writtenRows(i.pool, i.rows, i.which), i.pool.hd, got);
  return { q, kv: r.kv, kvTol: w.tol };
}

/**
 * Prefill with `qk8`: the kernel quantizes each 32 values of q·scale as the cache does (src/lab/ref/kv8.ts)
 * and takes q·k on the codes, so the reference takes q = (those values) / scale.
 */
function qk8Queries(q: Float64Array, scale: number): Float64Array {
  const v = quantizeKv8(q.map((x) => Math.fround(x * scale)), 32).values;
  return v.map((x) => x / scale);
}

/**
 * The reference output; rows left out of a sample are NaN (not checked). `absOut`: filled with each computed
 * output's softmax-weighted mean of |v| (prefill's f16 P·V bound), 0 elsewhere.
 */
export function reference(i: AttentionInputs, qkv = roped(i), absOut?: Float64Array): Float64Array {
  const { nq } = i;
  const pool = { ...i.pool, kv: qkv.kv };
  const r = {
    ...i,
    q: i.shape.qk8 ? qk8Queries(qkv.q, i.scale) : qkv.q,
    absOut,
    qkF16: !!i.shape.hqk && !i.pool.q8 && i.act === "f16",
  };
  const keys = (r: number) => Math.min(i.rows[r].pos + 1, i.window || Infinity);
  const macs = i.which.reduce((a, r) => a + keys(r) * nq * pool.hd * 2, 0);
  if (macs <= FULL_CHECK_MACS) return attentionRef({ ...pool, ...r });
  // First, last and evenly spaced rows (the last is the longest in prefill).
  const n = Math.max(2, Math.floor((i.which.length * FULL_CHECK_MACS) / macs));
  const pick = [
    ...new Set(
      Array.from({ length: n }, (_, k) => i.which[Math.round((k * (i.which.length - 1)) / (n - 1))]),
    ),
  ];
  const out = attentionRef({ ...pool, ...r, which: pick });
  const width = nq * pool.hd;
  for (const r of i.which) if (!pick.includes(r)) out.fill(NaN, r * width, (r + 1) * width);
  return out;
}

/**
 * Prefill on f16 sums P·V in f16 over each eight keys (F16_PV; q8: its V tile rounded to f16) before the f32
 * state: each partial Σ p_k·v_k carries the rounding of the f16 weights (and q8's values) and of eight f16
 * fused multiply-adds, each within 2^-11 of a partial sum, so to first order |error| ≤ 10·2^-11·Σ p_k|v_k|,
 * and over the whole row, after the division by the weights' sum, 10·2^-11 times the output's
 * softmax-weighted mean of |v|. Short contexts (a few large weights) bring the error near the act tolerance
 * alone.
 */
export function hpvBound(absMean: Float64Array): Tolerance["extra"] {
  return { bound: absMean.map((x) => 10 * 2 ** -11 * x), what: "10·2^-11·Σw|v| (f16 P·V per 8 keys)" };
}

export const HEAD_KEYS = {
  nq: "query heads",
  nkv: "kv heads (GQA ratio nq/nkv)",
  hd: "head dim",
  ps: "KV page size (tokens)",
  kv8: "1: 8-bit KV cache (q8 codes + f32 scale per block, src/lab/ref/kv8.ts); 0: act cache",
  window: "sliding window: keys j with pos − window < j ≤ pos (Gemma 3's local layers); 0: full causal",
};

/** The `window` shape key (0: full causal). */
export function windowOf(shape: Record<string, number | string>): number {
  return int(shape, "window", 0);
}
