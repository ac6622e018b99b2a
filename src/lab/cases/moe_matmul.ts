/**
 * Lab cases of the mixture-of-experts expert matmuls through src/ops/moe.ts: for decode rows
 * (`moe_vec.wgsl`) and for prefill rows (`moe_group.wgsl` then `moe_tiled.wgsl`), each as gate_up (SwiGLU of
 * [gate | up]) or down. The decode-row case also takes moe_vec's fusions: gate_up with the RMSNorm of raw
 * residual rows inside (norm = 1), and down adding the routed sum straight into the residual (combine = 1,
 * shared = 1 with Qwen3-Next's gated shared expert). Routes are drawn so that some experts get no pair and
 * one gets nearly every row. The router and combine cases are in moe.ts.
 * @module
 */
import type { Gpu } from "../../gpu/device.ts";
import { ShapeError } from "../../errors.ts";
import type { ExpertLinear, WeightFormat } from "../../ops/linear.ts";
import { allocMoeGroups, moeCombine, moeDown, moeGateUp, moeGroup, moeTileRows } from "../../ops/moe.ts";
import { moeUsesInt8X } from "../../ops/moe_vec.ts";
import { type CaseInputs, int, type KernelCase, oneOf, type Shape } from "../case.ts";
import { compare, EXACT, type OutputReport, type Tolerance } from "../compare.ts";
import { type Bound, BufferSet, readF32, readU32, seal } from "../harness.ts";
import {
  type ExpertShardData,
  moeDownCombineRef,
  moeDownRef,
  moeGateUpRef,
  moeGroupRef,
} from "../ref/moe.ts";
import { packedWords, parseFormat, weightBytes } from "../ref/quant.ts";
import type { Rng } from "../rng.ts";
import { SCRATCH_WORD } from "./moe.ts";
import { checkFormat, randomWeights } from "./weights.ts";

export interface MoeMatmulInputs extends CaseInputs {
  mode: "vec" | "tiled";
  op: "gate_up" | "down";
  M: number;
  row0: number;
  k: number;
  E: number;
  /** Stack rows per expert (gate_up: 2I) and the reduction length (gate_up: H; down: I). */
  N: number;
  K: number;
  /** Output columns per pair (gate_up: I; down: H). */
  cols: number;
  /** Rows of the buffers: row0 + M + 1 (the last row is never routed here: a stray write would show). */
  rows: number;
  format: WeightFormat;
  shards: ExpertShardData[];
  /** (rows·k) expert ids. */
  ids: Uint32Array;
  /** gate_up: (rows, K) f32; down: (rows·k, K) f32 (h, one row per pair). */
  x: Float64Array;
  /** (rows·k, cols) f32: the output before the kernels run. */
  y0: Float64Array;
  /** Output columns the reference computes (all when absent). */
  checkCols?: number[];
  /** gate_up, shape norm = 1: x holds raw residual rows, RMS-normalised (· gamma) inside the kernel. */
  norm?: { gamma: Float64Array; eps: number };
  /**
   * down, shape combine = 1: no y; x[r] += Σ_j weights[r, j]·y_{r·k+j} (+ sigmoid(gate[r])·shared y[r]) into
   * the residual `res` (rows, H), whose value before the kernel this holds.
   */
  combine?: {
    weights: Float64Array;
    res: Float64Array;
    shared?: { y: Float64Array; gate: Float64Array };
  };
  /** Lanes per team given to the wrappers (shape lanes > 0; absent: the wrappers' choice). */
  lanes?: number;
  /** The kernels took int8 x (moe_vec_x8.wgsl; set when bound: it depends on the device and shape key x8). */
  x8?: boolean;
}

/** Reference work (multiply-adds) above which only a sample of columns is checked. */
const FULL_CHECK_MACS = 2 ** 27;

/**
 * Per row, k distinct experts drawn without replacement from skewed odds: a third of the experts (at most
 * E − k − 1) never, one E times as often as the rest.
 */
export function drawRoutes(rng: Rng, rows: number, E: number, k: number): Uint32Array {
  const perm = rng.permutation(E);
  const cold = Math.max(0, Math.min(Math.floor(E / 3), E - k - 1));
  const odds = new Float64Array(E).fill(1);
  for (let i = 0; i < cold; i++) odds[perm[i]] = 0;
  odds[perm[E - 1]] = E;
  const ids = new Uint32Array(rows * k);
  for (let r = 0; r < rows; r++) {
    const left = Float64Array.from(odds);
    for (let j = 0; j < k; j++) {
      let u = rng.next() * left.reduce((a, b) => a + b, 0);
      let pick = -1;
      for (let e = 0; e < E && (pick < 0 || u >= 0); e++) {
        if (left[e] === 0) continue;
        pick = e; // the last expert still in the draw, should rounding run u past the end
        u -= left[e];
      }
      ids[r * k + j] = pick;
      left[pick] = 0;
    }
  }
  return ids;
}

/** Random inputs for an expert-matmul shape (exported for batch-invariance tests that rebind them). */
export function makeMoeMatmul(
  mode: "vec" | "tiled",
  shape: Shape,
  rng: Rng,
  env: { act: "f16" | "f32"; maxBinding: number },
): MoeMatmulInputs {
  const op = oneOf(shape, "op", ["gate_up", "down"] as const);
  const M = int(shape, "M"), row0 = int(shape, "row0", 0), k = int(shape, "k"), E = int(shape, "E");
  const H = int(shape, "H"), I = int(shape, "I");
  const [N, K, cols] = op === "gate_up" ? [2 * I, H, I] : [H, I, H];
  const format = parseFormat(String(shape.w), oneOf(shape, "scale", ["f16", "bf16"] as const));
  checkFormat(format, K, `moe ${op}`);
  if (K % 32 !== 0) throw new ShapeError(`moe ${op}: K=${K} must be a multiple of 32`);
  if (k > E) throw new ShapeError(`moe: k=${k} > E=${E}`);
  const rows = row0 + M + 1;
  const ids = drawRoutes(rng, rows, E, k);
  const x = rng.signedArray((op === "gate_up" ? rows : rows * k) * K).map(Math.fround);
  // Experts split into shards as the loader would (a stack over the binding limit splits by expert).
  const expertBytes = packedWords(format, N, K).w * 4;
  const fit = Math.floor((env.maxBinding * 0.9) / expertBytes);
  const count = Math.max(int(shape, "shards"), Math.ceil(E / fit));
  const per = Math.ceil(E / count);
  const shards: ExpertShardData[] = [];
  const amp = Math.sqrt(3 / K); // outputs O(1) whatever K is, so one tolerance fits all shapes
  for (let e0 = 0; e0 < E; e0 += per) {
    const n = Math.min(per, E - e0);
    const w = randomWeights(rng, format, n * N, K, { amp, minShards: 1, maxBinding: Infinity });
    shards.push({ e0, count: n, packed: w[0].packed });
  }
  const y0 = rng.signedArray(rows * k * cols).map(Math.fround);
  const macs = M * k * K * (op === "gate_up" ? 2 * cols : cols);
  let checkCols: number[] | undefined;
  if (macs > FULL_CHECK_MACS) {
    const want = Math.max(8, Math.floor((FULL_CHECK_MACS / macs) * cols));
    const set = new Set<number>([0, cols - 1]);
    while (set.size < Math.min(want, cols)) set.add(rng.int(0, cols));
    checkCols = [...set].sort((a, b) => a - b);
  }
  const dims = { M, row0, k, E, N, K, cols, rows };
  const fused = fusedInputs(mode, op, shape, rng, { rows, k, K, N, shards: shards.length });
  // The norm matters only if the raw rows are far from unit RMS.
  if (fused.norm) { for (let n = 0; n < x.length; n++) x[n] = Math.fround(x[n] * 7.5); }
  return { shape, act: env.act, mode, op, ...dims, format, shards, ids, x, y0, checkCols, ...fused };
}

/** The fused variants' inputs (drawn after the rest, so the plain inputs of a seed stay the same). */
function fusedInputs(
  mode: "vec" | "tiled",
  op: "gate_up" | "down",
  shape: Shape,
  rng: Rng,
  d: { rows: number; k: number; K: number; N: number; shards: number },
): Pick<MoeMatmulInputs, "norm" | "combine" | "lanes"> {
  const flag = (key: string) => Number(shape[key] ?? 0) !== 0;
  const lanes = Number(shape.lanes ?? 0);
  if (!Number.isInteger(lanes) || lanes < 0) throw new ShapeError(`moe: lanes=${lanes}`);
  const out: Pick<MoeMatmulInputs, "norm" | "combine" | "lanes"> = lanes > 0 ? { lanes } : {};
  if ((flag("norm") || flag("combine")) && mode !== "vec") {
    throw new ShapeError("moe: norm and combine are vector-mode fusions");
  }
  if (flag("norm")) {
    if (op !== "gate_up") throw new ShapeError("moe: norm = 1 fuses the RMSNorm into gate_up");
    out.norm = {
      gamma: Float64Array.from({ length: d.K }, () => Math.fround(1 + rng.signed(0.5))),
      eps: 1e-6,
    };
  }
  if (flag("shared") && !flag("combine")) throw new ShapeError("moe: shared = 1 needs combine = 1");
  if (flag("combine")) {
    if (op !== "down") throw new ShapeError("moe: combine = 1 fuses the combine into down");
    if (d.shards !== 1) throw new ShapeError(`moe: combine needs one shard (${d.shards})`);
    const f = (n: number, a = 1) => rng.signedArray(n, a).map(Math.fround);
    const weights = Float64Array.from({ length: d.rows * d.k }, () => Math.fround(rng.range(0.02, 1)));
    const res = f(d.rows * d.N);
    out.combine = {
      weights,
      res,
      ...(flag("shared") ? { shared: { y: f(d.rows * d.N), gate: f(d.rows, 4) } } : {}),
    };
  }
  return out;
}

/**
 * Uploads `i` and records its kernels (tiled: moeGroup, then the matmul, per block); `parts` records one
 * block per {M, row0} over the same buffers instead (batch-invariance tests). The groups buffer starts
 * filled with a NaN pattern and is shared by the blocks: nothing may rely on it being cleared. `split`
 * (combine inputs): moeDown into y, then moeCombine, instead of the fused moeDown (bitwise tests).
 */
export async function bindMoeMatmul(
  gpu: Gpu,
  i: MoeMatmulInputs,
  parts?: { M: number; row0: number }[],
  opts: { split?: boolean } = {},
): Promise<Bound> {
  // x8 = 1 (the engine's default) lets 4-bit experts in vector mode take int8 x where the device allows it;
  // x8 = 0 keeps moe_vec.wgsl. Both stay tested.
  const g = gpu.withProfile({ moe: { int8X: Number(i.shape.x8 ?? 1) !== 0 } });
  i.x8 = i.mode === "vec" && moeUsesInt8X(g, i.format, i.K, i.op === "gate_up" ? 4 : Math.max(4, i.k));
  const set = new BufferSet(g);
  const x = set.upload("x", Float32Array.from(i.x));
  const ids = set.upload("ids", i.ids);
  const y = set.upload("y", Float32Array.from(i.y0));
  const norm = i.norm && { weight: set.upload("gamma", Float32Array.from(i.norm.gamma)), eps: i.norm.eps };
  const c = i.combine;
  const combine = c && {
    weights: set.upload("weights", Float32Array.from(c.weights)),
    x: set.upload("res", Float32Array.from(c.res), { mutable: true }),
    shared: c.shared && {
      y: set.upload("shared.y", Float32Array.from(c.shared.y)),
      gate: set.upload("shared.gate", Float32Array.from(c.shared.gate)),
    },
  };
  const w: ExpertLinear = {
    name: `experts.${i.op}`,
    E: i.E,
    N: i.N,
    K: i.K,
    format: i.format,
    shards: i.shards.map((s, n) => ({
      e0: s.e0,
      count: s.count,
      w: set.upload(`w${n}`, s.packed.w),
      scales: s.packed.scales && set.upload(`scales${n}`, s.packed.scales),
      biases: s.packed.biases && set.upload(`biases${n}`, s.packed.biases),
    })),
  };
  const groups = i.mode === "tiled" ? allocMoeGroups(gpu, i.rows * i.k, i.E) : undefined;
  if (groups) {
    gpu.device.queue.writeBuffer(
      groups.buffer,
      0,
      new Uint32Array(groups.buffer.size / 4).fill(SCRATCH_WORD),
    );
  }
  const ctx = set.context();
  for (const p of parts ?? [{ M: i.M, row0: i.row0 }]) {
    const a = { w, ids, M: p.M, row0: p.row0, k: i.k, mode: i.mode, groups, lanes: i.lanes };
    if (groups) await moeGroup(ctx, { ids, M: p.M, row0: p.row0, k: i.k, E: i.E, groups });
    if (i.op === "gate_up") await moeGateUp(ctx, { ...a, x, h: y, norm });
    else if (!combine) await moeDown(ctx, { ...a, h: x, y });
    else if (!opts.split) await moeDown(ctx, { ...a, h: x, combine });
    else {
      await moeDown(ctx, { ...a, h: x, y });
      await moeCombine(ctx, { ...combine, y, M: p.M, row0: p.row0, k: i.k, H: i.N });
    }
  }
  const b = seal(set, ctx, { maxKvLen: 1 }, async () => ({
    ...(combine
      ? { x: await readF32(gpu, combine.x, c!.res.length) }
      : { y: await readF32(gpu, y, i.y0.length) }),
    ...(groups ? { groups: await readU32(gpu, groups.buffer, 3 * i.E + 1 + i.M * i.k) } : {}),
  }));
  return { ...b, destroy: () => (b.destroy(), groups?.destroy()) };
}

/**
 * f32 accumulation over K (error ~√K·2^-24 on O(1) outputs); gate_up adds silu·up (f32 exp and products,
 * both factors carrying the accumulation error). The same on int8 x: the reference quantizes x as the kernel
 * does (quantizeX8), the integer dots are exact, and what is left is the f32 sum of the chunks' terms.
 */
export function moeMatmulTolerance(shape: Shape, mode: "vec" | "tiled"): Record<string, Tolerance> {
  const K = Number(shape.op === "gate_up" ? shape.H : shape.I);
  const y: Tolerance = shape.op === "gate_up"
    ? { atol: 4e-7 * Math.sqrt(K) + 2e-6, rtol: 3e-5 }
    : { atol: 2e-7 * Math.sqrt(K) + 1e-6, rtol: 1e-5 };
  if (mode === "tiled") return { y, counts: EXACT, offsets: EXACT, tiles: EXACT, order: EXACT };
  // norm: normalised rows times gamma ≈ 1 ± 0.5 have about twice the RMS of the plain case's rows, so each
  // dot is about twice as large, and h four times (plus the f32 norm factor's relative error, in rtol).
  if (Number(shape.norm ?? 0) !== 0 && shape.op === "gate_up") {
    return { y: { atol: 4 * y.atol, rtol: y.rtol } };
  }
  // combine: k products of weights ≤ 1, each within y's tolerance (|y| ≲ 1, so its relative part taken as
  // absolute), then the combine's own f32 sum (moe_combine's tolerance).
  if (Number(shape.combine ?? 0) !== 0) {
    return { x: { atol: Number(shape.k) * (y.atol + y.rtol) + 2e-6, rtol: 1e-5 } };
  }
  return { y };
}

function checkMoeMatmul(got: Record<string, Float64Array>, i: MoeMatmulInputs): OutputReport[] {
  const tol = moeMatmulTolerance(i.shape, i.mode);
  if (i.combine) return [compare("x", got.x, moeDownCombineRef({ ...i, ...i.combine }), tol.x)];
  const y = i.op === "gate_up" ? moeGateUpRef(i) : moeDownRef(i);
  const out = [compare("y", got.y, y, tol.y)];
  if (i.mode !== "tiled") return out;
  // The grouping: counts, offsets, tile starts exactly; the order as a set per expert (atomics pick it).
  const g = moeGroupRef({ ...i, tileRows: moeTileRows(i.M * i.k, i.E) });
  const E = i.E, gw = got.groups;
  const order = Float64Array.from(g.pairs.flatMap((l, e) => {
    const o = g.offsets[e];
    return [...gw.subarray(3 * E + 1 + o, 3 * E + 1 + o + l.length)].sort((a, b) => a - b);
  }));
  out.push(
    compare("counts", gw.subarray(0, E), g.counts, EXACT),
    compare("offsets", gw.subarray(E, 2 * E), g.offsets, EXACT),
    compare("tiles", gw.subarray(2 * E, 3 * E + 1), g.tiles, EXACT),
    compare("order", order, g.pairs.flat(), EXACT),
  );
  return out;
}

const MATMUL_KEYS = {
  op: "gate_up (W = [gate | up] (2I, H), h = silu(gate)·up) or down (W (H, I))",
  M: "rows (each routes to k experts)",
  row0: "first row",
  k: "experts per row",
  E: "experts",
  H: "hidden size (gate_up: K)",
  I: "expert intermediate size (down: K, a multiple of 32 and of the group)",
  w: "weight format: q4g<group>, q8g<group> (group 32, 64, 128), f16 or bf16",
  scale: "scale/bias dtype of quantized weights: f16 or bf16",
  shards: "minimum expert shards of the stack (more when one would pass the binding limit)",
  norm: "vec gate_up, 1: x is the raw residual, each row RMS-normalised (· a random weight) in the kernel",
  combine: "vec down, 1: the routed sum added straight into a residual (moeCombine fused; one shard)",
  shared: "with combine, 1: plus sigmoid(gate)·the shared expert's output (Qwen3-Next)",
  lanes: "vec: lanes per team (0: the wrappers' choice from the format and K)",
  x8: "vec, 4-bit: 1 takes int8 x (moe_vec_x8.wgsl) where the device allows it (engine default), 0 f32 x",
};

/** Qwen3-30B-A3B's experts: hidden 2048, 768 per expert, 128 experts, 8 per token. */
function moeMatmulCase(mode: "vec" | "tiled"): KernelCase<MoeMatmulInputs> {
  const sw = {
    op: "gate_up",
    w: "q4g64",
    scale: "bf16",
    shards: 1,
    norm: 0,
    combine: 0,
    shared: 0,
    lanes: 0,
    x8: 1,
  };
  return {
    files: mode === "vec" ? ["moe_vec.wgsl", "moe_vec_x8.wgsl"] : ["moe_tiled.wgsl", "moe_group.wgsl"],
    summary: mode === "vec"
      ? "expert matmul per (row, expert) pair: only the routed experts' weights are read (decode)"
      : "pairs grouped by expert on the GPU, then a tiled matmul per expert over its pairs (prefill)",
    defaults: { M: mode === "vec" ? 1 : 512, row0: 0, k: 8, E: 128, H: 2048, I: 768, ...sw },
    small: mode === "vec"
      ? { M: 3, row0: 1, k: 3, E: 7, H: 192, I: 37, ...sw }
      : { M: 70, row0: 2, k: 3, E: 7, H: 192, I: 37, ...sw },
    keys: MATMUL_KEYS,
    make: (shape, rng, env) => makeMoeMatmul(mode, shape, rng, env),
    bind: (gpu, i) => bindMoeMatmul(gpu, i),
    check: checkMoeMatmul,
    tolerance: (s) => moeMatmulTolerance(s, mode),
    cost(s) {
      const M = Number(s.M), k = Number(s.k), E = Number(s.E), H = Number(s.H), I = Number(s.I);
      const [N, K] = s.op === "gate_up" ? [2 * I, H] : [H, I];
      const combine = Number(s.combine) !== 0;
      // At most every expert is read once; the combining kernel reads each pair's expert itself.
      const experts = combine ? M * k : Math.min(E, M * k);
      // Outputs: y, or (combine) the residual read and written, the weights and the shared expert's y.
      const out = combine ? M * (2 * N + k + (Number(s.shared) ? N + 1 : 0)) : M * k * N;
      const f = parseFormat(String(s.w));
      return {
        bytes: experts * weightBytes(f, N, K) + (M * K + out) * 4,
        flops: 2 * M * k * N * K,
        int8: mode === "vec" && Number(s.x8) === 1 && f.kind === "q" && f.bits === 4,
      };
    },
  };
}

export const moeVecCase: KernelCase<MoeMatmulInputs> = moeMatmulCase("vec");
export const moeTiledCase: KernelCase<MoeMatmulInputs> = moeMatmulCase("tiled");
