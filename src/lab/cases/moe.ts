/**
 * Lab cases of the mixture-of-experts router (`moe_route.wgsl`) and combine (`moe_combine.wgsl`) through
 * src/ops/moe.ts. The expert matmuls' cases (`moe_vec.wgsl`, `moe_group.wgsl` then `moe_tiled.wgsl`) are in
 * moe_matmul.ts.
 * @module
 */
import { ShapeError } from "../../errors.ts";
import { moeCombine } from "../../ops/moe.ts";
import { moeRoute } from "../../ops/moe_route.ts";
import { type CaseInputs, compareAll, int, type KernelCase } from "../case.ts";
import { EXACT, type Tolerance } from "../compare.ts";
import { BufferSet, readF32, readU32, seal } from "../harness.ts";
import { moeCombineRef, moeRouteRef } from "../ref/moe.ts";

// ---------------------------------------------------------------------------------------------- router

export interface MoeRouteInputs extends CaseInputs {
  R: number;
  row0: number;
  E: number;
  k: number;
  renormalize: boolean;
  /** (row0 + R + 1, E) f32 logits; ids and weights have a row past the routed ones, to stay untouched. */
  logits: Float64Array;
}

const routeTol = (): Record<string, Tolerance> => ({ ids: EXACT, weights: { atol: 1e-6, rtol: 3e-5 } });
/** What `BufferSet.scratch` fills a buffer with (a NaN as f32). */
export const SCRATCH_WORD = 0x7fc00001;

export const moeRouteCase: KernelCase<MoeRouteInputs> = {
  files: ["moe_route.wgsl"],
  summary: "router: softmax over E expert logits, top-k (ties: lower expert), weights (renormalized)",
  defaults: { R: 16, row0: 0, E: 128, k: 8, renorm: 1 },
  small: { R: 3, row0: 1, E: 13, k: 3, renorm: 1 },
  keys: {
    R: "rows",
    row0: "first row routed",
    E: "experts (≤ 512)",
    k: "experts per row (≤ 16)",
    renorm: "1: weights divided by their sum (norm_topk_prob)",
  },
  make(shape, rng, env) {
    const R = int(shape, "R"), row0 = int(shape, "row0", 0), E = int(shape, "E"), k = int(shape, "k");
    if (k > E) throw new ShapeError(`moe_route: k=${k} > E=${E}`);
    // Distinct logits a clear step apart (no near-ties at f32 precision), then exact ties on purpose: the
    // top logit copied to another expert, and one more pair of equal logits.
    const logits = new Float64Array((row0 + R + 1) * E);
    const step = 8 / E;
    for (let r = 0; r < row0 + R + 1; r++) {
      const perm = rng.permutation(E);
      const l = logits.subarray(r * E, (r + 1) * E);
      for (let e = 0; e < E; e++) l[e] = Math.fround((perm[e] - Math.floor(E / 2) + 0.25) * step);
      if (E >= 4) {
        const top = perm.indexOf(E - 1);
        l[(top + 1 + rng.int(0, E - 1)) % E] = l[top];
        l[rng.int(0, E)] = l[rng.int(0, E)];
      }
    }
    return { shape, act: env.act, R, row0, E, k, renormalize: Number(shape.renorm) !== 0, logits };
  },
  async bind(gpu, i) {
    const set = new BufferSet(gpu);
    const { R, row0, E, k, renormalize } = i;
    const n = (row0 + R + 1) * k;
    const logits = set.upload("logits", Float32Array.from(i.logits));
    const ids = set.scratch("ids", n * 4);
    const weights = set.scratch("weights", n * 4);
    const ctx = set.context();
    await moeRoute(ctx, { logits, ids, weights, R, row0, E, k, renormalize });
    return seal(set, ctx, { maxKvLen: 1 }, async () => ({
      ids: await readU32(gpu, ids, n),
      weights: await readF32(gpu, weights, n),
    }));
  },
  check(got, i) {
    // Rows outside the routed ones keep the scratch pattern (ids compared; weights NaN: not checked).
    const r = moeRouteRef(i);
    const n = (i.row0 + i.R + 1) * i.k;
    const ids = new Float64Array(n).fill(SCRATCH_WORD);
    const weights = new Float64Array(n).fill(NaN);
    ids.set(r.ids.flat(), i.row0 * i.k);
    weights.set(r.weights.flat(), i.row0 * i.k);
    return compareAll(got, { ids, weights }, routeTol());
  },
  tolerance: routeTol,
  cost: (s) => {
    const R = Number(s.R), E = Number(s.E), k = Number(s.k);
    return { bytes: R * E * 4 + R * k * 8, flops: R * E * (4 + 2 * k) };
  },
};

// --------------------------------------------------------------------------------------------- combine

export interface MoeCombineInputs extends CaseInputs {
  M: number;
  row0: number;
  k: number;
  H: number;
  /** (rows·k, H) expert outputs, (rows, k) routing weights, (rows, H) residual before the kernel. */
  y: Float64Array;
  weights: Float64Array;
  x: Float64Array;
  shared?: { y: Float64Array; gate: Float64Array };
}

const combineTol = (): Record<string, Tolerance> => ({ x: { atol: 2e-6, rtol: 1e-5 } });

export const moeCombineCase: KernelCase<MoeCombineInputs> = {
  files: ["moe_combine.wgsl"],
  summary: "x += Σ_j weight_j·y_j over a row's experts (+ sigmoid-gated shared expert)",
  defaults: { M: 16, row0: 0, k: 8, H: 2048, shared: 0 },
  small: { M: 3, row0: 1, k: 3, H: 37, shared: 1 },
  keys: {
    M: "rows",
    row0: "first row (rows before it are left alone)",
    k: "experts per row",
    H: "hidden size",
    shared: "1: add sigmoid(gate)·shared expert output (Qwen3-Next)",
  },
  make(shape, rng, env) {
    const M = int(shape, "M"), row0 = int(shape, "row0", 0), k = int(shape, "k"), H = int(shape, "H");
    const rows = row0 + M + 1;
    const f = (n: number, a = 1) => rng.signedArray(n, a).map(Math.fround);
    const weights = Float64Array.from({ length: rows * k }, () => Math.fround(rng.range(0.02, 1)));
    const shared = shape.shared ? { y: f(rows * H), gate: f(rows, 4) } : undefined;
    return { shape, act: env.act, M, row0, k, H, y: f(rows * k * H), weights, x: f(rows * H), shared };
  },
  async bind(gpu, i) {
    const set = new BufferSet(gpu);
    const y = set.upload("y", Float32Array.from(i.y));
    const weights = set.upload("weights", Float32Array.from(i.weights));
    const x = set.upload("x", Float32Array.from(i.x), { mutable: true });
    const shared = i.shared && {
      y: set.upload("shared.y", Float32Array.from(i.shared.y)),
      gate: set.upload("shared.gate", Float32Array.from(i.shared.gate)),
    };
    const ctx = set.context();
    await moeCombine(ctx, { y, weights, x, M: i.M, row0: i.row0, k: i.k, H: i.H, shared });
    return seal(set, ctx, { maxKvLen: 1 }, async () => ({ x: await readF32(gpu, x, i.x.length) }));
  },
  check: (got, i) => compareAll(got, { x: moeCombineRef(i) }, combineTol()),
  tolerance: combineTol,
  cost: (s) => {
    const M = Number(s.M), k = Number(s.k), H = Number(s.H);
    return { bytes: (M * k * H + 2 * M * H + (s.shared ? M * H : 0)) * 4, flops: 2 * M * k * H };
  },
};
