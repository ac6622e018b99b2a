/**
 * Lab case of `rms_norm.wgsl` through `rmsNorm()` (src/ops/norm.ts), with and without the row gather.
 * @module
 */
import { rmsNorm } from "../../ops/norm.ts";
import { type CaseInputs, compareAll, int, type KernelCase, num } from "../case.ts";
import type { Tolerance } from "../compare.ts";
import { BufferSet, readF32, seal } from "../harness.ts";
import type { ActDtype } from "../ref/half.ts";
import { rmsNormRef } from "../ref/norm.ts";

export interface NormInputs extends CaseInputs {
  R: number;
  H: number;
  eps: number;
  /** (X, H) f32 residual rows. */
  x: Float64Array;
  weight: Float64Array;
  gather?: number[];
  /** First row of x and y normalised (a step's prefill rows; not with gather). */
  row0: number;
  /** (row0 + R, H) initial y: rows before row0 must keep it. */
  y0: Float64Array;
}

/** y after the kernel: rows before row0 untouched, then the normalised rows. */
function normRef(i: NormInputs): Float64Array {
  const y = Float64Array.from(i.y0);
  const x = i.gather ? i.x : i.x.subarray(i.row0 * i.H);
  y.set(rmsNormRef({ ...i, x }), i.row0 * i.H);
  return y;
}

/** f32 in and out on both paths (y feeds a matmul): f32 sum of squares and inverseSqrt (2 ulp). */
function tolerance(_act: ActDtype): Record<string, Tolerance> {
  return { y: { atol: 1e-6, rtol: 2e-6 } };
}

export const rmsNormCase: KernelCase<NormInputs> = {
  files: ["rms_norm.wgsl"],
  summary: "y = x · rsqrt(mean x² + eps) · w per row (optionally over gathered rows), f32 in and out",
  defaults: { R: 16, H: 2560, eps: 1e-6, gather: 0, X: 24, row0: 0 },
  small: { R: 5, H: 321, eps: 1e-5, gather: 1, X: 11, row0: 0 },
  keys: {
    R: "rows normalised",
    H: "row length (hidden size)",
    eps: "epsilon",
    gather: "1: rows come from idx[r] (the final norm over rows that need logits)",
    X: "rows in x (gather sources; ≥ row0 + R without gather)",
    row0: "first row normalised (without gather): rows before it are left alone",
  },
  make(shape, rng, env) {
    const R = int(shape, "R"), H = int(shape, "H");
    const row0 = shape.gather ? 0 : int(shape, "row0", 0);
    const X = Math.max(int(shape, "X"), row0 + R);
    // Rows of very different scale: the norm must remove it.
    const x = new Float64Array(X * H);
    for (let r = 0; r < X; r++) {
      const amp = 2 ** rng.int(-4, 6);
      for (let k = 0; k < H; k++) x[r * H + k] = Math.fround(rng.signed(amp));
    }
    const weight = Float64Array.from(
      { length: H },
      () => Math.fround(rng.range(0.2, 1.8) * (rng.next() < 0.1 ? -1 : 1)),
    );
    const gather = shape.gather ? Array.from({ length: R }, () => rng.int(0, X)) : undefined;
    const y0 = Float64Array.from({ length: (row0 + R) * H }, () => rng.signed(1));
    return { shape, act: env.act, R, H, eps: num(shape, "eps"), x, weight, gather, row0, y0 };
  },
  async bind(gpu, i) {
    const set = new BufferSet(gpu);
    const x = set.upload("x", Float32Array.from(i.x));
    const weight = set.upload("weight", Float32Array.from(i.weight));
    const y = set.upload("y", Float32Array.from(i.y0));
    const gather = i.gather && set.upload("idx", Uint32Array.from(i.gather));
    const ctx = set.context();
    await rmsNorm(ctx, { x, weight, y, R: i.R, H: i.H, eps: i.eps, gather, row0: i.row0 });
    return seal(set, ctx, { maxKvLen: 1 }, async () => ({ y: await readF32(gpu, y, i.y0.length) }));
  },
  check: (got, i) => compareAll(got, { y: normRef(i) }, tolerance(i.act)),
  tolerance: (_s, act) => tolerance(act),
  cost(shape) {
    const R = Number(shape.R), H = Number(shape.H);
    return { bytes: R * H * 8 + H * 4, flops: 4 * R * H };
  },
};
