/**
 * Float64 references of the mixture-of-experts kernels (moe_route, moe_group, moe_vec, moe_tiled,
 * moe_combine). The grouped and the per-pair matmuls compute the same thing, so one dense per-pair
 * reference serves both; moe_vec's fused variants are the same references composed: gate_up of the
 * RMS-normalised rows (NORM), and down followed by the combine (COMBINE); moe_vec_x8's int8 x is modelled
 * as the dense int8-x reference does (quantizeX8). Row r routes to k experts; pair
 * p = r·k + j. Entries outside the written rows keep their initial values (a stray write shows up as a
 * mismatch).
 * @module
 */
import type { WeightFormat } from "../../ops/linear.ts";
import { quantizeX8 } from "./matmul.ts";
import { rmsNormRef } from "./norm.ts";
import { dequantRow, groupBiasRow, type PackedWeights } from "./quant.ts";

/** Experts [e0, e0 + count) of a stack, packed: expert e's row n is row (e − e0)·N + n. */
export interface ExpertShardData {
  e0: number;
  count: number;
  packed: PackedWeights;
}

/**
 * Softmax over each row's E logits, then the k largest probabilities in descending order (ties: lower
 * expert first); weights are the chosen probabilities, divided by their sum when `renormalize`.
 */
export function moeRouteRef(
  a: { logits: Float64Array; R: number; row0: number; E: number; k: number; renormalize: boolean },
): { ids: number[][]; weights: number[][] } {
  const ids: number[][] = [];
  const weights: number[][] = [];
  for (let r = a.row0; r < a.row0 + a.R; r++) {
    const l = a.logits.subarray(r * a.E, (r + 1) * a.E);
    const mx = Math.max(...l);
    const ex = Array.from(l, (v) => Math.exp(v - mx));
    const s = ex.reduce((t, v) => t + v, 0);
    const order = ex.map((v, e) => ({ p: v / s, e })).sort((u, v) => v.p - u.p || u.e - v.e).slice(0, a.k);
    const tot = order.reduce((t, o) => t + o.p, 0);
    ids.push(order.map((o) => o.e));
    weights.push(order.map((o) => (a.renormalize ? o.p / tot : o.p)));
  }
  return { ids, weights };
}

/** What moe_group.wgsl writes: per expert count, first slot, first tile; the pairs of each expert. */
export function moeGroupRef(
  a: { ids: ArrayLike<number>; M: number; row0: number; k: number; E: number; tileRows: number },
): { counts: number[]; offsets: number[]; tiles: number[]; pairs: number[][] } {
  const pairs: number[][] = Array.from({ length: a.E }, () => []);
  for (let p = a.row0 * a.k; p < (a.row0 + a.M) * a.k; p++) pairs[a.ids[p]].push(p);
  const counts = pairs.map((l) => l.length);
  const offsets: number[] = [];
  const tiles: number[] = [];
  let o = 0, t = 0;
  for (const c of counts) {
    offsets.push(o);
    tiles.push(t);
    o += c;
    t += Math.ceil(c / a.tileRows);
  }
  tiles.push(t);
  return { counts, offsets, tiles, pairs };
}

/** One expert-matmul problem: the stack, the rows and their routes. */
export interface ExpertMatmulRef {
  format: WeightFormat;
  /** Stack rows per expert (gate_up: 2I). */
  N: number;
  K: number;
  shards: ExpertShardData[];
  /** (rows·k) expert ids. */
  ids: ArrayLike<number>;
  M: number;
  row0: number;
  k: number;
  /** gate_up: (rows, K) indexed by row; down: (rows·k, K) indexed by pair. */
  x: Float64Array;
  /** (rows·k, cols) output before the kernel runs. */
  y0: Float64Array;
  /** Compute only these output columns (big shapes); the others are NaN, i.e. not checked. */
  checkCols?: number[];
  /** gate_up: x holds raw rows, each RMS-normalised (· gamma) before the matmul (moe_vec's NORM). */
  norm?: { gamma: Float64Array; eps: number };
  /**
   * x is quantized to int8 per 32 values as lib/x8.wgsl does (moe_vec_x8.wgsl: 4-bit experts; under `norm`
   * the normalised rows), quantizeX8 of the dense int8-x reference.
   */
  x8?: boolean;
}

/** One decoded stack row: its values and, on int8 x, the bias of each value's group. */
interface Row {
  w: Float64Array;
  b?: Float64Array;
}

/** Expert e's stack row n (K values), decoded (with its group biases on int8 x). */
function expertRow(a: ExpertMatmulRef, e: number, n: number): Row {
  const s = a.shards.find((s) => e >= s.e0 && e < s.e0 + s.count);
  if (!s) throw new RangeError(`expert ${e} is in no shard`);
  const r = (e - s.e0) * a.N + n;
  const w = dequantRow(a.format, s.packed, r, a.K);
  return a.x8 ? { w, b: groupBiasRow(a.format, s.packed, r, a.K) } : { w };
}

/** The dot products' view of x: as given, or int8-quantized (xt) with the per-32 corrections Σx − Σx̃. */
interface XView {
  x: Float64Array;
  q?: { xt: Float64Array; corr: Float64Array };
}

function xView(a: ExpertMatmulRef, x: Float64Array): XView {
  return a.x8 ? { x, q: quantizeX8(x) } : { x };
}

/** x row at xb · w: on int8 x, Σ x̃·w + Σ_chunks bias·(Σx − Σx̃) (the kernel adds bias·Σx exactly). */
function dot(v: XView, xb: number, r: Row): number {
  const w = r.w;
  let acc = 0;
  if (!v.q) {
    for (let i = 0; i < w.length; i++) acc += v.x[xb + i] * w[i];
    return acc;
  }
  for (let i = 0; i < w.length; i++) acc += v.q.xt[xb + i] * w[i];
  for (let c = 0; c < w.length / 32; c++) acc += r.b![c * 32] * v.q.corr[xb / 32 + c];
  return acc;
}

/**
 * y (rows·k, cols) with, for every pair p of the rows and output column n, y[p, n] = out(x row of p, the
 * expert's stack rows `rowsOf(n)`); each expert's rows are decoded once per column.
 */
function perPair(
  a: ExpertMatmulRef,
  cols: number,
  xRow: (p: number) => number,
  rowsOf: (n: number) => number[],
  out: (xb: number, w: Row[]) => number,
): Float64Array {
  const y = Float64Array.from(a.y0);
  const p0 = a.row0 * a.k, p1 = (a.row0 + a.M) * a.k;
  if (a.checkCols) y.fill(NaN, p0 * cols, p1 * cols);
  for (const n of a.checkCols ?? Array.from({ length: cols }, (_, n) => n)) {
    const rows = new Map<number, Row[]>();
    for (let p = p0; p < p1; p++) {
      const e = a.ids[p];
      if (!rows.has(e)) rows.set(e, rowsOf(n).map((r) => expertRow(a, e, r)));
      y[p * cols + n] = out(xRow(p) * a.K, rows.get(e)!);
    }
  }
  return y;
}

/**
 * h[p, i] = silu(x̂_r·W_e[i]) · (x̂_r·W_e[I + i]), r = p / k, e = ids[p]; h (rows·k, I). x̂ = x, or with
 * `norm` the rows row0 .. row0 + M − 1 as x·(mean(x²) + eps)^−½·gamma.
 */
export function moeGateUpRef(a: ExpertMatmulRef): Float64Array {
  const I = a.N / 2;
  let x = a.x;
  if (a.norm) {
    x = Float64Array.from(a.x);
    const b = a.row0 * a.K;
    const R = a.M, H = a.K;
    x.set(rmsNormRef({ x: a.x.subarray(b, b + R * H), weight: a.norm.gamma, R, H, eps: a.norm.eps }), b);
  }
  const v = xView(a, x);
  return perPair(a, I, (p) => Math.floor(p / a.k), (i) => [i, I + i], (xb, [wg, wu]) => {
    const g = dot(v, xb, wg);
    return (g / (1 + Math.exp(-g))) * dot(v, xb, wu);
  });
}

/** y[p, n] = h_p · W_e[n], e = ids[p]; h (rows·k, K), y (rows·k, N). */
export function moeDownRef(a: ExpertMatmulRef): Float64Array {
  const v = xView(a, a.x);
  return perPair(a, a.N, (p) => p, (n) => [n], (xb, [w]) => dot(v, xb, w));
}

/**
 * x[r, n] + Σ_j weights[r, j]·y[r·k + j, n] (+ sigmoid(gate[r])·sy[r, n]) for rows row0 .. row0 + M − 1;
 * other rows keep x.
 */
export function moeCombineRef(a: {
  x: Float64Array;
  y: Float64Array;
  weights: Float64Array;
  M: number;
  row0: number;
  k: number;
  H: number;
  shared?: { y: Float64Array; gate: Float64Array };
}): Float64Array {
  const out = Float64Array.from(a.x);
  for (let r = a.row0; r < a.row0 + a.M; r++) {
    const sg = a.shared ? 1 / (1 + Math.exp(-a.shared.gate[r])) : 0;
    for (let n = 0; n < a.H; n++) {
      let acc = 0;
      for (let j = 0; j < a.k; j++) acc += a.weights[r * a.k + j] * a.y[(r * a.k + j) * a.H + n];
      if (a.shared) acc += sg * a.shared.y[r * a.H + n];
      out[r * a.H + n] += acc;
    }
  }
  return out;
}

/**
 * moe_vec.wgsl's COMBINE: the residual `res` (rows, N) after res[r, n] += Σ_j weights[r, j]·(h_{r·k+j} ·
 * W_e[n]) (+ sigmoid(gate[r])·sy[r, n]) for the rows row0 .. row0 + M − 1, i.e. moeCombineRef over
 * moeDownRef's y (columns left out by `checkCols` come out NaN: not checked).
 */
export function moeDownCombineRef(
  a: ExpertMatmulRef & {
    weights: Float64Array;
    res: Float64Array;
    shared?: { y: Float64Array; gate: Float64Array };
  },
): Float64Array {
  const y = moeDownRef(a);
  return moeCombineRef({
    x: a.res,
    y,
    weights: a.weights,
    M: a.M,
    row0: a.row0,
    k: a.k,
    H: a.N,
    shared: a.shared,
  });
}
