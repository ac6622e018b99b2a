/** Lab case of `sigmoid_gate.wgsl` through src/ops/gate.ts. @module */
import { sigmoidGate } from "../../ops/gate.ts";
import { type CaseInputs, compareAll, int, type KernelCase } from "../case.ts";
import type { Tolerance } from "../compare.ts";
import { BufferSet, readF32, seal } from "../harness.ts";
import { actBytesOf, encodeAct, roundAct } from "../ref/half.ts";
import { sigmoidGateRef } from "../ref/gate.ts";

export interface SigmoidGateInputs extends CaseInputs {
  R: number;
  W: number;
  row0: number;
  /** (row0 + R, W) act. */
  gate: Float64Array;
  /** (row0 + R, W) f32: y before the kernel. */
  y0: Float64Array;
}

/** Exact act inputs, f32 exp and division: a few ulp. */
const TOL: Record<string, Tolerance> = { y: { atol: 1e-7, rtol: 2e-6 } };

export const sigmoidGateCase: KernelCase<SigmoidGateInputs> = {
  files: ["sigmoid_gate.wgsl"],
  summary: "y ·= sigmoid(gate): gated attention's output gate (act gate, f32 y in place)",
  defaults: { R: 16, W: 4096, row0: 0 },
  small: { R: 3, W: 517, row0: 0 },
  keys: { R: "rows", W: "row width (heads × head dim)", row0: "first row (rows before it are left alone)" },
  make(shape, rng, env) {
    const R = int(shape, "R"), W = int(shape, "W"), row0 = int(shape, "row0", 0);
    const n = (row0 + R) * W;
    const gate = Float64Array.from({ length: n }, () => roundAct(rng.signed(8), env.act));
    const y0 = Float64Array.from({ length: n }, () => Math.fround(rng.signed(2)));
    return { shape, act: env.act, R, W, row0, gate, y0 };
  },
  async bind(gpu, i) {
    const set = new BufferSet(gpu);
    const gate = set.upload("gate", encodeAct(i.gate, i.act));
    const y = set.upload("y", Float32Array.from(i.y0), { mutable: true });
    const ctx = set.context();
    await sigmoidGate(ctx, { gate, y, R: i.R, W: i.W, row0: i.row0 });
    return seal(set, ctx, { maxKvLen: 1 }, async () => ({ y: await readF32(gpu, y, i.y0.length) }));
  },
  check: (got, i) => {
    const from = i.row0 * i.W;
    const y = Float64Array.from(i.y0);
    y.set(sigmoidGateRef(i.gate.subarray(from), i.y0.subarray(from)), from);
    return compareAll(got, { y }, TOL);
  },
  tolerance: () => TOL,
  cost(shape, act) {
    const n = Number(shape.R) * Number(shape.W);
    return { bytes: n * (actBytesOf(act) + 8), flops: 4 * n };
  },
};
