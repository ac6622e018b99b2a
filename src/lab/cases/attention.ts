/**
 * Lab cases of attention over the paged cache: split-K decode (`attention_decode.wgsl` then
 * `attention_combine.wgsl`, recorded together by `attentionDecode()`) and tiled prefill
 * (`attention_prefill.wgsl` via `attentionPrefill()`), both in src/ops/attention.ts.
 * @module
 */
import { ShapeError } from "../../errors.ts";
import { TUNED } from "../../gpu/profile.ts";
import { attentionDecode, attentionPrefill } from "../../ops/attention.ts";
import { type CaseInputs, compareAll, int, type KernelCase, num } from "../case.ts";
import type { Tolerance } from "../compare.ts";
import { BufferSet, readF32, seal } from "../harness.ts";
import { actBytesOf, type ActDtype, encodeAct, roundAct } from "../ref/half.ts";
import { attentionRef } from "../ref/attention.ts";
import { quantizeKv8 } from "../ref/kv8.ts";
import { ropeInvFreq, ropeRef } from "../ref/rope.ts";
import { encodeRows, type Row } from "../ref/paged.ts";
import type { Rng } from "../rng.ts";
import {
  kv8Of,
  kv8Tolerance,
  kvBytes,
  type Pool,
  quantizeWritten,
  randomPool,
  readKv,
  uploadKv,
  writtenRows,
} from "./paged.ts";

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
function tolerance(act: ActDtype, kv8 = false): Record<string, Tolerance> {
  return {
    out: act === "f16" ? { atol: 5e-4, rtol: 2e-3 } : { atol: 2e-6, rtol: 1e-4 },
    // The K/V cells the fused RoPE path writes: rope.wgsl's tolerance (tests/ops/rope_test.ts).
    kv: kv8 ? kv8Tolerance(4.5) : act === "f16" ? { atol: 1e-5, rtol: 1e-3 } : { atol: 1e-6, rtol: 2e-6 },
  };
}

function heads(shape: Record<string, number | string>): { nq: number; nkv: number; hd: number } {
  const nq = int(shape, "nq"), nkv = int(shape, "nkv"), hd = int(shape, "hd");
  if (nq % nkv !== 0) throw new ShapeError(`attention: nq=${nq} is not a multiple of nkv=${nkv}`);
  return { nq, nkv, hd };
}

/**
 * Queries U(±4) against keys U(±1) give scores (after hd^-½) with a std of about 1.3: a peaked softmax (a
 * flat one would hide errors) that still mixes many keys.
 */
function queries(rng: Rng, n: number, act: ActDtype): Float64Array {
  const amp = 4;
  return Float64Array.from({ length: n }, () => roundAct(rng.signed(amp), act));
}

/** With `on`, query head h's values times 2^(h mod 5 − 2) (exact in f16: a power of two). */
function spread(q: Float64Array, nq: number, hd: number, on: number, act: ActDtype): Float64Array {
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
function roped(
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
function reference(i: AttentionInputs, qkv = roped(i), absOut?: Float64Array): Float64Array {
  const { nq } = i;
  const pool = { ...i.pool, kv: qkv.kv };
  const r = {
    ...i,
    q: i.shape.qk8 ? qk8Queries(qkv.q, i.scale) : qkv.q,
    absOut,
    qkF16: !!i.shape.hqk && !i.pool.q8 && i.act === "f16",
  };
  const macs = i.which.reduce((a, r) => a + (i.rows[r].pos + 1) * nq * pool.hd * 2, 0);
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
 * and over the whole row, after the division by the weights' sum, 10·2^-11 times the output's softmax-weighted
 * mean of |v|. Short contexts (a few large weights) bring the error near the act tolerance alone.
 */
function hpvBound(absMean: Float64Array): Tolerance["extra"] {
  return { bound: absMean.map((x) => 10 * 2 ** -11 * x), what: "10·2^-11·Σw|v| (f16 P·V per 8 keys)" };
}

const HEAD_KEYS = {
  nq: "query heads",
  nkv: "kv heads (GQA ratio nq/nkv)",
  hd: "head dim",
  ps: "KV page size (tokens)",
  kv8: "1: 8-bit KV cache (q8 codes + f32 scale per block, src/lab/ref/kv8.ts); 0: act cache",
};

export const attentionDecodeCase: KernelCase<AttentionInputs> = {
  files: ["attention_decode.wgsl", "attention_combine.wgsl"],
  summary: "decode attention over the paged cache, split along keys (256 per split) then combined; " +
    "rope 1: RoPE, Q/K norm and the new K/V write fused in (the engine's decode path)",
  // Qwen3-4B: 32 q / 8 kv heads, head_dim 128, q/k norm, theta 1e6; four sequences, the longest 4096 tokens.
  defaults: {
    D: 4,
    nq: 32,
    nkv: 8,
    hd: 128,
    ps: 16,
    len: 4096,
    row0: 0,
    rope: 1,
    qknorm: 1,
    rot: 128,
    mscale: 1,
    theta: 1e6,
    kv8: 0,
  },
  small: {
    D: 3,
    nq: 4,
    nkv: 4,
    hd: 64,
    ps: 16,
    len: 301,
    row0: 0,
    rope: 0,
    qknorm: 1,
    rot: 40,
    mscale: 1.13,
    theta: 10000,
    kv8: 0,
  },
  keys: {
    D: "decode rows (one sequence each)",
    ...HEAD_KEYS,
    len: "KV length of the first row; the others draw theirs from [1, len]",
    row0: "rows before the decode rows",
    rope: "1: q from the raw QKV projection, RoPE and the K/V write of position pos in the kernel",
    qknorm: "(rope) 1: Qwen3 per-head q/k RMS norm",
    rot: "(rope) rotated dims (even, ≤ hd)",
    mscale: "(rope) RoPE attention factor (YaRN)",
    theta: "(rope) RoPE base",
  },
  make(shape, rng, env) {
    const { nq, nkv, hd } = heads(shape);
    const D = int(shape, "D"), len = int(shape, "len"), row0 = int(shape, "row0", 0);
    const lens = Array.from({ length: D }, (_, r) => (r === 0 ? len : rng.int(1, len + 1)));
    const pool = randomPool(rng, { lens, nkv, hd, ps: int(shape, "ps"), act: env.act, kv8: kv8Of(shape) });
    const rows: Row[] = [
      ...Array.from({ length: row0 }, () => ({ token: 1, pos: rng.int(0, len), slot: 0, kind: 0 })),
      ...lens.map((l, s) => ({ token: rng.int(0, 1000), pos: l - 1, slot: s, kind: 1 })),
    ];
    const R = rows.length;
    let rope: AttentionInputs["rope"];
    if (shape.rope) {
      const rot = int(shape, "rot", 2);
      if (rot % 2 || rot > hd) throw new ShapeError(`attention: rot=${rot} must be even and ≤ hd=${hd}`);
      const norm = () => Float64Array.from({ length: hd }, () => Math.fround(rng.range(0.5, 1.5)));
      rope = {
        qkv: Float64Array.from({ length: R * (nq + 2 * nkv) * hd }, () => roundAct(rng.signed(2), env.act)),
        invFreq: ropeInvFreq(num(shape, "theta"), rot),
        ...(shape.qknorm ? { qn: norm(), kn: norm() } : {}),
        rot,
        eps: 1e-6,
        mscale: Math.fround(num(shape, "mscale")),
      };
    }
    return {
      shape,
      act: env.act,
      mode: "decode",
      rows,
      which: lens.map((_, r) => row0 + r),
      row0,
      nq,
      scale: Math.fround(1 / Math.sqrt(hd)),
      q: queries(rng, R * nq * hd, env.act),
      pool,
      out0: Float64Array.from({ length: R * nq * hd }, () => Math.fround(rng.signed(1))),
      rope,
    };
  },
  async bind(gpu, i) {
    const set = new BufferSet(gpu);
    const { pool } = i;
    const R = i.rows.length;
    const maxLen = Math.max(...i.which.map((r) => i.rows[r].pos + 1));
    const maxSplit = Math.ceil(maxLen / gpu.profile.decodeAttention.keysPerSplit);
    const out = set.upload("out", Float32Array.from(i.out0));
    const kv = uploadKv(set, pool, i.act, !!i.rope);
    const rp = i.rope;
    const ctx = set.context();
    await attentionDecode(ctx, {
      rows: set.upload("rows", encodeRows(i.rows)),
      ...(rp
        ? {
          rope: {
            qkv: set.upload("qkv", encodeAct(rp.qkv, i.act)),
            invFreq: set.upload("inv_freq", Float32Array.from(rp.invFreq)),
            qNorm: rp.qn && set.upload("q_norm", Float32Array.from(rp.qn)),
            kNorm: rp.kn && set.upload("k_norm", Float32Array.from(rp.kn)),
            rot: rp.rot,
            eps: rp.eps,
            mscale: rp.mscale,
          },
        }
        : {}),
      // With rope: the queries of rows longer than `fusedRopeMaxKeys`, written by rope.wgsl first.
      q: set.upload("q", encodeAct(i.q, i.act), { mutable: true }),
      pages: set.upload("pages", pool.pages),
      ...kv,
      out,
      row0: i.row0,
      D: i.which.length,
      nq: i.nq,
      nkv: pool.nkv,
      hd: pool.hd,
      pageSize: pool.ps,
      maxPages: pool.maxPages,
      scale: i.scale,
      maxSplit,
      opart: set.scratch("opart", R * i.nq * maxSplit * pool.hd * 4),
      ml: set.scratch("ml", R * i.nq * maxSplit * 8),
    });
    return seal(
      set,
      ctx,
      // As the scheduler gives them: the longest row, and the shortest (the short-row variant is skipped
      // when every row is longer than `fusedRopeMaxKeys`).
      { maxKvLen: maxLen, minKvLen: Math.min(...i.which.map((r) => i.rows[r].pos + 1)) },
      async () => ({
        out: await readF32(gpu, out, i.out0.length),
        ...(rp ? { kv: await readKv(gpu, kv, pool, i.act) } : {}),
      }),
    );
  },
  check(got, i) {
    const r = roped(i, got.kv);
    const tol = { ...tolerance(i.act), ...(r.kvTol ? { kv: r.kvTol } : {}) };
    // With rope the whole pool is compared: the new cells, and no stray write elsewhere. Attention is
    // checked over the same pool (q8: with the code the kernel took where either is right).
    return compareAll(got, { out: reference(i, r), ...(i.rope ? { kv: r.kv } : {}) }, tol);
  },
  tolerance: (s, act) => tolerance(act, kv8Of(s)),
  cost(shape, act) {
    // Every row's K and V once (the first row at `len`, the others on average len/2), q and out.
    const { nq, nkv, hd } = heads(shape);
    const D = Number(shape.D), len = Number(shape.len);
    const keys = len + (D - 1) * (len + 1) / 2;
    const splits = D * Math.ceil(len / TUNED.decodeAttention.keysPerSplit);
    return {
      bytes: keys * 2 * nkv * hd * kvBytes(act, kv8Of(shape), hd) + D * nq * hd * (actBytesOf(act) + 4) +
        2 * splits * nq * (hd + 2) * 4,
      flops: 4 * keys * nq * hd,
    };
  },
};

export const attentionPrefillCase: KernelCase<AttentionInputs> = {
  files: ["attention_prefill.wgsl", "attention_prefill_quad.wgsl"],
  summary: "causal attention for a prefill segment (flash attention over the paged cache)",
  // Qwen3-4B, the second 512-token chunk of a prompt.
  defaults: { S: 512, p0: 512, nq: 32, nkv: 8, hd: 128, ps: 16, row0: 0, kv8: 0, qk8: 0, hqk: 0, qspread: 0 },
  small: { S: 45, p0: 37, nq: 6, nkv: 2, hd: 64, ps: 16, row0: 2, kv8: 0, qk8: 0, hqk: 0, qspread: 0 },
  keys: {
    S: "segment rows (consecutive positions of one sequence)",
    p0: "position of the first segment row (KV before it is cached)",
    ...HEAD_KEYS,
    row0: "step rows before the segment (decode rows of another sequence)",
    qk8: "(kv8, head dim a multiple of 32) 1: q·k on integer dot products, q quantized per 32 values",
    hqk:
      "(f16 cache, quad kernel) 1: q·k on f16 fused multiply-adds (the engine's default); the reference sums the scores alike",
    qspread:
      "1: query head h scaled by 2^(h mod 5 − 2), so a kernel that shared a quantization scale between heads would show",
  },
  make(shape, rng, env) {
    const { nq, nkv, hd } = heads(shape);
    const S = int(shape, "S"), p0 = int(shape, "p0", 0), row0 = int(shape, "row0", 0);
    // Slot 1 is the segment's sequence; slot 0 belongs to the rows before it.
    const pool = randomPool(rng, {
      lens: [p0 + S + 7, p0 + S],
      nkv,
      hd,
      ps: int(shape, "ps"),
      act: env.act,
      kv8: kv8Of(shape),
    });
    const rows: Row[] = [
      ...Array.from({ length: row0 }, () => ({ token: 1, pos: rng.int(0, p0 + S), slot: 0, kind: 1 })),
      ...Array.from({ length: S }, (_, i) => ({ token: rng.int(0, 1000), pos: p0 + i, slot: 1, kind: 0 })),
    ];
    const R = rows.length;
    return {
      shape,
      act: env.act,
      mode: "prefill",
      rows,
      which: rows.map((_, r) => r).slice(row0),
      row0,
      nq,
      scale: Math.fround(1 / Math.sqrt(hd)),
      q: spread(queries(rng, R * nq * hd, env.act), nq, hd, int(shape, "qspread", 0), env.act),
      pool,
      out0: Float64Array.from({ length: R * nq * hd }, () => Math.fround(rng.signed(1))),
    };
  },
  async bind(gpu, i) {
    const { pool } = i;
    if (i.shape.qk8 && !(i.pool.q8 && pool.hd % 32 === 0)) {
      throw new ShapeError("attention: qk8 needs kv8 and a head dim that is a multiple of 32");
    }
    // The shape, not the profile, picks the numerics the reference mirrors: q·k on q's int8 codes, in f16.
    const set = new BufferSet(
      gpu.withProfile({ prefillAttention: { int8QK: !!i.shape.qk8, f16QK: !!i.shape.hqk } }),
    );
    const out = set.upload("out", Float32Array.from(i.out0));
    const ctx = set.context();
    await attentionPrefill(ctx, {
      rows: set.upload("rows", encodeRows(i.rows)),
      q: set.upload("q", encodeAct(i.q, i.act)),
      pages: set.upload("pages", pool.pages),
      ...uploadKv(set, pool, i.act),
      out,
      row0: i.row0,
      S: i.which.length,
      nq: i.nq,
      nkv: pool.nkv,
      hd: pool.hd,
      pageSize: pool.ps,
      maxPages: pool.maxPages,
      scale: i.scale,
    });
    const maxLen = i.rows[i.rows.length - 1].pos + 1;
    return seal(
      set,
      ctx,
      { maxKvLen: maxLen },
      async () => ({ out: await readF32(gpu, out, i.out0.length) }),
    );
  },
  check: (got, i) => {
    const tol = tolerance(i.act);
    if (i.act !== "f16") return compareAll(got, { out: reference(i) }, tol);
    const absMean = new Float64Array(i.out0.length);
    const out = reference(i, roped(i), absMean);
    return compareAll(got, { out }, { ...tol, out: { ...tol.out, extra: hpvBound(absMean) } });
  },
  tolerance: (_s, act) => tolerance(act),
  cost(shape, act) {
    const { nq, nkv, hd } = heads(shape);
    const S = Number(shape.S), p0 = Number(shape.p0);
    const keys = S * p0 + (S * (S + 1)) / 2; // (query, key) pairs
    // The K/V of the longest row, at least once (tiles re-read it; this is the floor).
    return {
      bytes: (p0 + S) * 2 * nkv * hd * kvBytes(act, kv8Of(shape), hd) + S * nq * hd * (actBytesOf(act) + 4),
      flops: 4 * keys * nq * hd,
    };
  },
};
