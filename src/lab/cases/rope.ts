/**
 * Lab case of `rope.wgsl` through `rope()` (src/ops/rope.ts): optional Q/K norm, partial rotary, mscale,
 * and the K/V write into a shuffled paged cache (the whole pool is compared, so a stray write fails), act
 * or 8-bit (`kv8`: K/V quantized as they are written, src/lab/ref/kv8.ts).
 * @module
 */
import { ShapeError } from "../../errors.ts";
import { rope } from "../../ops/rope.ts";
import { type CaseInputs, compareAll, int, type KernelCase, num } from "../case.ts";
import type { Tolerance } from "../compare.ts";
import { BufferSet, readAct, seal } from "../harness.ts";
import { actBytesOf, type ActDtype, encodeAct, roundAct } from "../ref/half.ts";
import { encodeRows, type Row } from "../ref/paged.ts";
import { ropeInvFreq, ropeRef } from "../ref/rope.ts";
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

export interface RopeInputs extends CaseInputs {
  rows: Row[];
  nq: number;
  rot: number;
  eps: number;
  mscale: number;
  qkv: Float64Array;
  invFreq: Float64Array;
  qn?: Float64Array;
  kn?: Float64Array;
  pool: Pool;
}

/**
 * The angle is the same f32 product on both sides; GPU cos/sin after range reduction and inverseSqrt add
 * ~1e-6 on O(1) values. f16 adds the output rounding. q8 (`kv8`): the written K/V cells' codes exactly,
 * but for a value that error can take across a rounding boundary (either code; quantizeWritten in
 * paged.ts), and scales to a few f32 ulp plus that error (kv8Tolerance); check() takes the largest block
 * max written, the nominal bound here 4.5, about the largest |K| the inputs give (RMS-normed U(±2) heads,
 * norm weights ≤ 1.5, a rotated pair, mscale).
 */
function tolerance(act: ActDtype, kv8 = false): Record<string, Tolerance> {
  const t: Tolerance = act === "f16" ? { atol: 1e-5, rtol: 1e-3 } : { atol: 1e-6, rtol: 2e-6 };
  return { q: t, kv: kv8 ? kv8Tolerance(4.5) : t };
}

export const ropeCase: KernelCase<RopeInputs> = {
  files: ["rope.wgsl"],
  summary:
    "per-head Q/K RMS norm + rotate-half RoPE (partial rotary, mscale); Q out, K/V into the paged cache",
  // Qwen3-4B: 32 q / 8 kv heads, head_dim 128, q/k norm, theta 1e6.
  defaults: {
    R: 16,
    nq: 32,
    nkv: 8,
    hd: 128,
    rot: 128,
    ps: 16,
    qknorm: 1,
    mscale: 1,
    theta: 1e6,
    slots: 4,
    maxpos: 2048,
    kv8: 0,
  },
  small: {
    R: 7,
    nq: 6,
    nkv: 2,
    hd: 40,
    rot: 24,
    ps: 5,
    qknorm: 1,
    mscale: 1.13,
    theta: 10000,
    slots: 3,
    maxpos: 97,
    kv8: 0,
  },
  keys: {
    R: "step rows",
    nq: "query heads",
    nkv: "kv heads",
    hd: "head dim",
    rot: "rotated dims (even, ≤ hd)",
    ps: "KV page size (tokens)",
    qknorm: "1: Qwen3 per-head q/k RMS norm",
    mscale: "RoPE attention factor (YaRN)",
    theta: "RoPE base",
    slots: "sequences the rows belong to",
    maxpos: "positions are drawn from [0, maxpos)",
    kv8: "1: 8-bit KV cache (q8 codes + f32 scale per block, src/lab/ref/kv8.ts); 0: act cache",
  },
  make(shape, rng, env) {
    const R = int(shape, "R"), nq = int(shape, "nq"), nkv = int(shape, "nkv"), hd = int(shape, "hd");
    const rot = int(shape, "rot"),
      ps = int(shape, "ps"),
      slots = int(shape, "slots"),
      maxpos = int(shape, "maxpos");
    if (R > slots * maxpos) {
      throw new ShapeError(`rope: ${R} rows need distinct (slot, pos) among ${slots}×${maxpos}`);
    }
    // Distinct (slot, pos) per row: two rows writing one KV cell would make the result order-dependent.
    const used = new Set<number>();
    const rows: Row[] = [];
    for (let r = 0; r < R; r++) {
      let slot: number, pos: number;
      do {
        slot = rng.int(0, slots);
        pos = r === 0 ? maxpos - 1 : rng.int(0, maxpos);
      } while (used.has(slot * maxpos + pos));
      used.add(slot * maxpos + pos);
      rows.push({ token: rng.int(0, 1000), pos, slot, kind: rng.int(0, 2) });
    }
    const lens = Array(slots).fill(maxpos);
    const pool = randomPool(rng, { lens, nkv, hd, ps, act: env.act, kv8: kv8Of(shape) });
    const qkv = Float64Array.from(
      { length: R * (nq + 2 * nkv) * hd },
      () => roundAct(rng.signed(2), env.act),
    );
    const norm = () => Float64Array.from({ length: hd }, () => Math.fround(rng.range(0.5, 1.5)));
    const qk = shape.qknorm ? { qn: norm(), kn: norm() } : {};
    return {
      shape,
      act: env.act,
      rows,
      nq,
      rot,
      eps: 1e-6,
      mscale: Math.fround(num(shape, "mscale")),
      qkv,
      invFreq: ropeInvFreq(num(shape, "theta"), rot),
      ...qk,
      pool,
    };
  },
  async bind(gpu, i) {
    const set = new BufferSet(gpu);
    const { pool } = i;
    const R = i.rows.length;
    const buf = {
      rows: set.upload("rows", encodeRows(i.rows)),
      qkv: set.upload("qkv", encodeAct(i.qkv, i.act)),
      invFreq: set.upload("inv_freq", Float32Array.from(i.invFreq)),
      qNorm: i.qn && set.upload("q_norm", Float32Array.from(i.qn)),
      kNorm: i.kn && set.upload("k_norm", Float32Array.from(i.kn)),
      pages: set.upload("pages", pool.pages),
      ...uploadKv(set, pool, i.act, true),
      q: set.scratch("q", R * i.nq * pool.hd * 4),
    };
    const ctx = set.context();
    await rope(ctx, {
      ...buf,
      R,
      nq: i.nq,
      nkv: pool.nkv,
      hd: pool.hd,
      rot: i.rot,
      pageSize: pool.ps,
      maxPages: pool.maxPages,
      eps: i.eps,
      mscale: i.mscale,
    });
    return seal(set, ctx, { maxKvLen: 1 }, async () => ({
      q: await readAct(gpu, buf.q, R * i.nq * pool.hd, i.act),
      kv: await readKv(gpu, buf, pool, i.act),
    }));
  },
  check(got, i) {
    const r = ropeRef({
      ...i.pool,
      rows: i.rows,
      qkv: i.qkv,
      invFreq: i.invFreq,
      qn: i.qn,
      kn: i.kn,
      nq: i.nq,
      rot: i.rot,
      eps: i.eps,
      mscale: i.mscale,
      kv0: i.pool.kv,
    });
    const tol = tolerance(i.act);
    // q8: the rows' K/V head rows as the kernel stores them, quantized over each head row.
    if (i.pool.q8) {
      const offs = writtenRows(i.pool, i.rows, i.rows.map((_, k) => k));
      tol.kv = quantizeWritten(r.kv, offs, i.pool.hd, got.kv).tol;
    }
    return compareAll(got, r, tol);
  },
  tolerance: (s, act) => tolerance(act, kv8Of(s)),
  cost(shape, act) {
    const R = Number(shape.R), nq = Number(shape.nq), nkv = Number(shape.nkv), hd = Number(shape.hd);
    const ab = actBytesOf(act);
    // QKV read, q written, K/V written into the cache (act, or q8 codes and scales).
    return {
      bytes: R * (2 * nq + 2 * nkv) * hd * ab + R * 2 * nkv * hd * kvBytes(act, kv8Of(shape), hd) + R * 16,
      flops: R * (nq + nkv) * hd * (shape.qknorm ? 9 : 6),
    };
  },
};
