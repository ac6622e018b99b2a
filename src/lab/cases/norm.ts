/**
 * Lab case of `rms_norm.wgsl` through `rmsNorm()` (src/ops/norm.ts), with and without the row gather, and
 * with `add` (the norm added into y, Gemma's post-sublayer norms).
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
  /** (row0 + R, H) initial y: rows before row0 must keep it; with `add` the residual the norm joins. */
  y0: Float64Array;
  /** y += the norm (the `add` shape key). */
  add: boolean;
}

/**
 * y after the kernel: rows before row0 untouched, then the normalised rows (with `add`: plus y0's), and the
 * norm terms alone (before any add).
 */
function normRef(i: NormInputs): { y: Float64Array; norm: Float64Array } {
  const y = Float64Array.from(i.y0);
  const x = i.gather ? i.x : i.x.subarray(i.row0 * i.H);
  const norm = rmsNormRef({ x, weight: i.weight, R: i.R, H: i.H, eps: i.eps, gather: i.gather });
  const y0 = i.add ? i.y0.subarray(i.row0 * i.H) : undefined;
  y.set(rmsNormRef({ x, weight: i.weight, R: i.R, H: i.H, eps: i.eps, gather: i.gather, y0 }), i.row0 * i.H);
  return { y, norm };
}

/**
 * f32 in and out on both paths (y feeds a matmul): f32 sum of squares and inverseSqrt (2 ulp). With `add`
 * the norm's error is relative to the norm term, not to the sum (y0 may cancel it): 2e-6·|term| more.
 */
function tolerance(_act: ActDtype, norm?: Float64Array, row0 = 0, H = 0): Record<string, Tolerance> {
  const y: Tolerance = { atol: 1e-6, rtol: 2e-6 };
  if (!norm) return { y };
  const bound = new Float64Array(row0 * H + norm.length);
  norm.forEach((v, k) => bound[row0 * H + k] = 2e-6 * Math.abs(v));
  return { y: { ...y, extra: { bound, what: "2e-6·|norm term| (added to y0)" } } };
}

export const rmsNormCase: KernelCase<NormInputs> = {
  files: ["rms_norm.wgsl"],
  summary: "y = x · rsqrt(mean x² + eps) · w per row (optionally over gathered rows; add 1: y +=), " +
    "f32 in and out",
  defaults: { R: 16, H: 2560, eps: 1e-6, gather: 0, X: 24, row0: 0, add: 0 },
  small: { R: 5, H: 321, eps: 1e-5, gather: 1, X: 11, row0: 0, add: 0 },
  keys: {
    R: "rows normalised",
    H: "row length (hidden size)",
    eps: "epsilon",
    gather: "1: rows come from idx[r] (the final norm over rows that need logits)",
    X: "rows in x (gather sources; ≥ row0 + R without gather)",
    row0: "first row normalised (without gather): rows before it are left alone",
    add: "1: y[r] += the norm (Gemma's post-attention / post-feedforward norms into the residual)",
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
    // f32 values: with `add` the kernel reads them.
    const y0 = Float64Array.from({ length: (row0 + R) * H }, () => Math.fround(rng.signed(1)));
    const add = !!int(shape, "add", 0);
    return { shape, act: env.act, R, H, eps: num(shape, "eps"), x, weight, gather, row0, y0, add };
  },
  async bind(gpu, i) {
    const set = new BufferSet(gpu);
    const x = set.upload("x", Float32Array.from(i.x));
    const weight = set.upload("weight", Float32Array.from(i.weight));
    const y = set.upload("y", Float32Array.from(i.y0));
    const gather = i.gather && set.upload("idx", Uint32Array.from(i.gather));
    const ctx = set.context();
    await rmsNorm(ctx, { x, weight, y, R: i.R, H: i.H, eps: i.eps, gather, row0: i.row0, add: i.add });
    return seal(set, ctx, { maxKvLen: 1 }, async () => ({ y: await readF32(gpu, y, i.y0.length) }));
  },
  check: (got, i) => {
    const r = normRef(i);
    return compareAll(got, { y: r.y }, tolerance(i.act, i.add ? r.norm : undefined, i.row0, i.H));
  },
  tolerance: (_s, act) => tolerance(act),
  cost(shape) {
    const R = Number(shape.R), H = Number(shape.H);
    // x read, y written (and read with `add`).
    return { bytes: R * H * (shape.add ? 12 : 8) + H * 4, flops: (shape.add ? 5 : 4) * R * H };
  },
};
