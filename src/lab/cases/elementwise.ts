/** Lab case of `silu_mul.wgsl` through src/ops/elementwise.ts (the silu or gelu_tanh gate). @module */
import { type GateAct, siluMul } from "../../ops/elementwise.ts";
import { type CaseInputs, compareAll, int, type KernelCase, oneOf } from "../case.ts";
import type { Tolerance } from "../compare.ts";
import { BufferSet, readF32, seal } from "../harness.ts";
import { actBytesOf, type ActDtype, encodeAct, roundAct } from "../ref/half.ts";
import { siluMulRef } from "../ref/elementwise.ts";

export interface SiluMulInputs extends CaseInputs {
  R: number;
  I: number;
  /** First row handled (a step's prefill rows); earlier rows of h keep h0. */
  row0: number;
  /** (row0 + R, 2I) act: [gate | up]. */
  gu: Float64Array;
  /** (row0 + R, I) f32: h before the kernel. */
  h0: Float64Array;
  /** The gate's activation (the `fn` shape key). */
  fn: GateAct;
}

/**
 * gu is act (exact inputs), h f32 on both paths (it feeds a matmul): f32 exp and division, a few ulp; the
 * same for gelu_tanh, whose z = √(2/π)·(g + 0.044715·g³) adds a few ulp more (within a fifth of the bound).
 */
function siluTol(_act: ActDtype): Record<string, Tolerance> {
  return { h: { atol: 1e-7, rtol: 2e-6 } };
}

export const siluMulCase: KernelCase<SiluMulInputs> = {
  files: ["silu_mul.wgsl"],
  summary: "h = silu(gate) · up (or gelu_tanh(gate) · up) from the fused [gate | up] projection (act in, " +
    "f32 out)",
  defaults: { R: 16, I: 9728, row0: 0, fn: "silu" },
  small: { R: 3, I: 1037, row0: 0, fn: "silu" },
  keys: {
    R: "rows",
    I: "intermediate size",
    row0: "first row (rows before it are left alone)",
    fn: "the gate's activation: silu (SwiGLU) or gelu_tanh (Gemma's gelu_pytorch_tanh)",
  },
  make(shape, rng, env) {
    const R = int(shape, "R"), I = int(shape, "I"), row0 = int(shape, "row0", 0);
    const fn = oneOf(shape, "fn", ["silu", "gelu_tanh"] as const);
    // Gates over ±8 cover both tails of silu and gelu_tanh.
    const gu = Float64Array.from(
      { length: (row0 + R) * 2 * I },
      (_, k) => roundAct(rng.signed(k % (2 * I) < I ? 8 : 2), env.act),
    );
    const h0 = Float64Array.from({ length: (row0 + R) * I }, () => Math.fround(rng.signed(1)));
    return { shape, act: env.act, R, I, row0, gu, h0, fn };
  },
  async bind(gpu, i) {
    const set = new BufferSet(gpu);
    const gu = set.upload("gu", encodeAct(i.gu, i.act));
    const h = set.upload("h", Float32Array.from(i.h0), { mutable: true });
    const ctx = set.context();
    await siluMul(ctx, { gu, h, R: i.R, I: i.I, row0: i.row0, act: i.fn });
    return seal(set, ctx, { maxKvLen: 1 }, async () => ({ h: await readF32(gpu, h, i.h0.length) }));
  },
  check: (got, i) => {
    const h = Float64Array.from(i.h0);
    h.set(siluMulRef(i.gu.subarray(i.row0 * 2 * i.I), i.R, i.I, i.fn), i.row0 * i.I);
    return compareAll(got, { h }, siluTol(i.act));
  },
  tolerance: (_s, act) => siluTol(act),
  cost(shape, act) {
    const n = Number(shape.R) * Number(shape.I);
    return { bytes: n * (2 * actBytesOf(act) + 4), flops: 5 * n };
  },
};
