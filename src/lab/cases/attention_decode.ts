/**
 * The lab case of split-K decode attention over the paged cache: `attention_decode.wgsl` then
 * `attention_combine.wgsl`, recorded together by `attentionDecode()` (src/ops/attention.ts), with RoPE, Q/K
 * norm and the new K/V write fused in on request. Inputs, reference and tolerances: attention.ts.
 * @module
 */
import { ShapeError } from "../../errors.ts";
import { TUNED } from "../../gpu/profile.ts";
import { attentionDecode } from "../../ops/attention.ts";
import { compareAll, int, type KernelCase, num } from "../case.ts";
import { BufferSet, readF32, seal } from "../harness.ts";
import { actBytesOf, encodeAct, roundAct } from "../ref/half.ts";
import { ropeInvFreq } from "../ref/rope.ts";
import { encodeRows, type Row } from "../ref/paged.ts";
import { kv8Of, kvBytes, randomPool, readKv, uploadKv } from "./paged.ts";
import {
  type AttentionInputs,
  HEAD_KEYS,
  heads,
  queries,
  reference,
  roped,
  tolerance,
  windowOf,
} from "./attention.ts";

export const attentionDecodeCase: KernelCase<AttentionInputs> = {
  files: ["attention_decode.wgsl", "attention_combine.wgsl"],
  summary: "decode attention over the paged cache, split along keys (256 per split) then combined; " +
    "rope 1: RoPE, Q/K norm and the new K/V write fused in (the engine's decode path); " +
    "window: a sliding window",
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
    window: 0,
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
    window: 0,
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
      window: windowOf(shape),
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
      window: i.window,
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
    // Every row's K and V once (the first row at `len`, the others on average len/2; at most `window`), q
    // and out.
    const { nq, nkv, hd } = heads(shape);
    const D = Number(shape.D), len = Number(shape.len), W = Number(shape.window ?? 0) || Infinity;
    const keys = Math.min(len, W) + (D - 1) * Math.min((len + 1) / 2, W);
    const splits = D * Math.ceil(len / TUNED.decodeAttention.keysPerSplit);
    return {
      bytes: keys * 2 * nkv * hd * kvBytes(act, kv8Of(shape), hd) + D * nq * hd * (actBytesOf(act) + 4) +
        2 * splits * nq * (hd + 2) * 4,
      flops: 4 * keys * nq * hd,
    };
  },
};
