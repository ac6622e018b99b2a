/**
 * The lab cases of causal prefill attention over the paged cache (flash attention) via `attentionPrefill()`
 * (src/ops/attention.ts): on FMA units (`attention_prefill.wgsl` or `attention_prefill_quad.wgsl`) and on
 * matrix units (`attention_prefill_sgmat.wgsl`, where Dawn offers them). Inputs, reference and tolerances
 * (with the f16 P·V bound): attention.ts.
 * @module
 */
import { ShapeError } from "../../errors.ts";
import { attentionPrefill } from "../../ops/attention.ts";
import { usesMatrixAttention } from "../../ops/attention_matrix.ts";
import { compareAll, int, type KernelCase } from "../case.ts";
import { BufferSet, readF32, seal } from "../harness.ts";
import { actBytesOf, encodeAct } from "../ref/half.ts";
import { encodeRows, type Row } from "../ref/paged.ts";
import { kv8Of, kvBytes, randomPool, uploadKv } from "./paged.ts";
import {
  type AttentionInputs,
  HEAD_KEYS,
  heads,
  hpvBound,
  queries,
  reference,
  roped,
  spread,
  tolerance,
  windowOf,
} from "./attention.ts";

export const attentionPrefillCase = prefillCase(false);
export const attentionPrefillMatrixCase = prefillCase(true);

function prefillCase(matrixUnits: boolean): KernelCase<AttentionInputs> {
  return {
    files: matrixUnits
      ? ["attention_prefill_sgmat.wgsl"]
      : ["attention_prefill.wgsl", "attention_prefill_quad.wgsl"],
    summary: "causal attention for a prefill segment (flash attention over the paged cache), " +
      "optionally in a sliding window" + (matrixUnits ? ", q·k and P·V on matrix units (head dim 128)" : ""),
    // Qwen3-4B, the second 512-token chunk of a prompt.
    defaults: {
      S: 512,
      p0: 512,
      nq: 32,
      nkv: 8,
      hd: 128,
      ps: 16,
      row0: 0,
      kv8: 0,
      qk8: 0,
      hqk: 0,
      qspread: 0,
      window: 0,
      ...(matrixUnits ? { rescale: 0 } : {}),
    },
    small: {
      S: 45,
      p0: 37,
      nq: 6,
      nkv: 2,
      hd: matrixUnits ? 128 : 64,
      ps: 16,
      row0: 2,
      kv8: 0,
      qk8: 0,
      hqk: 0,
      qspread: 0,
      window: 0,
      ...(matrixUnits ? { rescale: 1 } : {}),
    },
    keys: {
      S: "segment rows (consecutive positions of one sequence)",
      p0: "position of the first segment row (KV before it is cached)",
      ...HEAD_KEYS,
      row0: "step rows before the segment (decode rows of another sequence)",
      qk8: "(kv8, head dim a multiple of 32) 1: q·k on integer dot products, q quantized per 32 values",
      hqk: "(f16 cache, quad kernel) 1: q·k on f16 fused multiply-adds (the engine's default); " +
        "the reference sums the scores alike",
      qspread: "1: query head h scaled by 2^(h mod 5 − 2), so a kernel that " +
        "shared a quantization scale between heads would show",
      ...(matrixUnits
        ? { rescale: "1: the output rescaled on every new max of a row (margin 0); 0: the profile's margin" }
        : {}),
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
        window: windowOf(shape),
      };
    },
    async bind(gpu, i) {
      const { pool } = i;
      if (i.shape.qk8 && !(i.pool.q8 && pool.hd % 32 === 0)) {
        throw new ShapeError("attention: qk8 needs kv8 and a head dim that is a multiple of 32");
      }
      if (matrixUnits && (i.shape.qk8 || i.shape.hqk)) {
        throw new ShapeError("attention on matrix units: q·k is f16 × f16 → f32 (no qk8 or hqk)");
      }
      // The shape, not the profile, picks the numerics the reference mirrors: q·k on q's int8 codes, in f16.
      const g = gpu.withProfile({
        prefillAttention: {
          int8QK: !!i.shape.qk8,
          f16QK: !!i.shape.hqk,
          matrixUnits,
          ...(i.shape.rescale ? { matrixRescaleMargin: 0 } : {}),
        },
      });
      if (matrixUnits && !usesMatrixAttention(g, { hd: i.pool.hd })) {
        throw new ShapeError(
          i.pool.hd !== 128
            ? `attention on matrix units: head dim ${i.pool.hd} (the kernel takes 128)`
            : `attention on matrix units: ${g.info.adapter} (${g.info.webgpu}) offers no f16 16×16×16 ` +
              "subgroup matrices with subgroups of 32",
        );
      }
      const set = new BufferSet(g);
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
        window: i.window,
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
      const S = Number(shape.S), p0 = Number(shape.p0), W = Number(shape.window ?? 0) || Infinity;
      // (query, key) pairs: position p0 + i sees min(p0 + i + 1, W) keys.
      let keys = 0;
      for (let i = 0; i < S; i++) keys += Math.min(p0 + i + 1, W);
      // The K/V of the longest row, at least once (tiles re-read it; this is the floor).
      return {
        bytes: (p0 + S) * 2 * nkv * hd * kvBytes(act, kv8Of(shape), hd) + S * nq * hd * (actBytesOf(act) + 4),
        flops: 4 * keys * nq * hd,
      };
    },
  };
}
