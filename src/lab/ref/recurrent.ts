/**
 * Float64 references of the recurrent token mixers: causal_conv.wgsl (depthwise causal conv1d with a rolling
 * state) and gated_delta.wgsl (gated delta rule + gated RMSNorm, HF torch_recurrent_gated_delta_rule and
 * Qwen3NextRMSNormGated). Units (one sequence's rows each) run in the order the host records them: decode
 * rows, then segments; each starts from a zero state when its first row has pos 0, else from the state at
 * its slot, and writes the state back.
 * @module
 */
import type { Units } from "../../ops/recurrent.ts";
import type { Row } from "./paged.ts";

/** Units in recording order as (first row, rows). */
export function unitList(u: Units): { row0: number; len: number }[] {
  const out = Array.from({ length: u.decode }, (_, r) => ({ row0: r, len: 1 }));
  for (const s of u.segments) if (s.len > 0) out.push({ row0: s.row0, len: s.len });
  return out;
}

export interface CausalConvRefArgs {
  /** (R, lds) */
  src: Float64Array;
  lds: number;
  C: number;
  KC: number;
  cols: { x: number; inGate?: number; outGate?: number };
  /** (C, KC) */
  weight: Float64Array;
  fn: "silu" | "none";
  /** (slots, KC−1, C) before the step. */
  state0: Float64Array;
  /** (R, C) before the step (rows outside every unit keep it). */
  y0: Float64Array;
  rows: Row[];
  units: Units;
}

/** y and the state after the step. */
export function causalConvRef(a: CausalConvRefArgs): { y: Float64Array; state: Float64Array } {
  const { C, KC, lds, cols } = a;
  const y = Float64Array.from(a.y0);
  const state = Float64Array.from(a.state0);
  const input = (r: number, c: number) =>
    a.src[r * lds + cols.x + c] * (cols.inGate === undefined ? 1 : a.src[r * lds + cols.inGate + c]);
  for (const { row0, len } of unitList(a.units)) {
    const { pos, slot } = a.rows[row0];
    const base = slot * (KC - 1) * C;
    for (let c = 0; c < C; c++) {
      // The unit's inputs, preceded by the KC−1 before it.
      const u = new Float64Array(KC - 1 + len);
      for (let k = 0; k < KC - 1; k++) u[k] = pos === 0 ? 0 : state[base + k * C + c];
      for (let t = 0; t < len; t++) u[KC - 1 + t] = input(row0 + t, c);
      for (let t = 0; t < len; t++) {
        let acc = 0;
        for (let i = 0; i < KC; i++) acc += a.weight[c * KC + i] * u[t + i];
        if (a.fn === "silu") acc = acc / (1 + Math.exp(-acc));
        const r = row0 + t;
        if (cols.outGate !== undefined) acc *= a.src[r * lds + cols.outGate + c];
        y[r * C + c] = acc;
      }
      for (let k = 0; k < KC - 1; k++) state[base + k * C + c] = u[len + k];
    }
  }
  return { y, state };
}

export interface GatedDeltaRefArgs {
  /** (R, 2·nk·dk + nv·dv): [q | k | v] */
  conv: Float64Array;
  /** (R, lds): z, b, a at their offsets */
  src: Float64Array;
  lds: number;
  zOff: number;
  bOff: number;
  aOff: number;
  aLog: Float64Array;
  dtBias: Float64Array;
  norm: Float64Array;
  eps: number;
  /** (slots, nv, dk, dv) before the step. */
  state0: Float64Array;
  /** (R, nv·dv) before the step. */
  out0: Float64Array;
  nk: number;
  nv: number;
  dk: number;
  dv: number;
  rows: Row[];
  units: Units;
}

const softplus = (x: number) => (x > 20 ? x : Math.log1p(Math.exp(x)));

/** out and the state after the step. */
export function gatedDeltaRef(a: GatedDeltaRefArgs): { out: Float64Array; state: Float64Array } {
  const { nk, nv, dk, dv } = a;
  const width = 2 * nk * dk + nv * dv;
  const out = Float64Array.from(a.out0);
  const state = Float64Array.from(a.state0);
  const l2n = (x: Float64Array) => {
    const inv = 1 / Math.sqrt(x.reduce((s, v) => s + v * v, 0) + 1e-6);
    return x.map((v) => v * inv);
  };
  for (const { row0, len } of unitList(a.units)) {
    const { pos, slot } = a.rows[row0];
    for (let h = 0; h < nv; h++) {
      const kh = Math.floor(h / (nv / nk));
      const base = (slot * nv + h) * dk * dv;
      const S = pos === 0 ? new Float64Array(dk * dv) : state.slice(base, base + dk * dv);
      for (let t = 0; t < len; t++) {
        const r = row0 + t;
        const at = (off: number, n: number) => a.conv.slice(r * width + off, r * width + off + n);
        const q = l2n(at(kh * dk, dk)).map((v) => v / Math.sqrt(dk));
        const k = l2n(at((nk + kh) * dk, dk));
        const v = at(2 * nk * dk + h * dv, dv);
        const beta = 1 / (1 + Math.exp(-a.src[r * a.lds + a.bOff + h]));
        const g = -Math.exp(a.aLog[h]) * softplus(a.src[r * a.lds + a.aOff + h] + a.dtBias[h]);
        const decay = Math.exp(g);
        for (let e = 0; e < dk * dv; e++) S[e] *= decay;
        const o = new Float64Array(dv);
        for (let j = 0; j < dv; j++) {
          let kv = 0;
          for (let i = 0; i < dk; i++) kv += S[i * dv + j] * k[i];
          const delta = (v[j] - kv) * beta;
          for (let i = 0; i < dk; i++) S[i * dv + j] += k[i] * delta;
          for (let i = 0; i < dk; i++) o[j] += S[i * dv + j] * q[i];
        }
        const inv = 1 / Math.sqrt(o.reduce((s, x) => s + x * x, 0) / dv + a.eps);
        for (let j = 0; j < dv; j++) {
          const z = a.src[r * a.lds + a.zOff + h * dv + j];
          out[r * nv * dv + h * dv + j] = o[j] * inv * a.norm[j] * (z / (1 + Math.exp(-z)));
        }
      }
      state.set(S, base);
    }
  }
  return { out, state };
}
