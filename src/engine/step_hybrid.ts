/**
 * The StepGraph ops of non-dense layers, over the same step layout: the gated-attention output gate, the
 * recurrent token mixers (gated DeltaNet, short conv; per-slot state in recurrent.ts) and the sparse MoE MLP.
 * Decode rows take the vector kernels and prefill rows the tiled, grouped ones, as in the dense ops, so a
 * row's numbers never depend on its batch.
 * @module
 */
import { ShapeError } from "../errors.ts";
import type { LinearGroup } from "../loader/weights.ts";
import type { ExpertLinear } from "../ops/linear.ts";
import { moeCombine, moeDown, moeDownCanCombine, moeGateUp, moeGateUpRoutes, moeGroup } from "../ops/moe.ts";
import { moeRoute } from "../ops/moe_route.ts";
import { causalConv, gatedDelta, type Units } from "../ops/recurrent.ts";
import { sigmoidGate } from "../ops/gate.ts";
import { rmsNorm } from "../ops/norm.ts";
import type { HybridActivations } from "./resources.ts";
import type { ActName, StepGraph } from "./step.ts";

/** A hybrid activation buffer by op name. */
export function hybridBuffer(h: HybridActivations, name: ActName): GPUBuffer | undefined {
  switch (name) {
    case "gate":
    case "mix":
    case "conv":
    case "delta":
      return h[name];
    case "router":
    case "shared":
      return h.moe?.[name];
    case "sharedGate":
      return h.moe?.sharedGate;
    default:
      return undefined;
  }
}

/** The sequences of a step as the recurrent ops take them: each decode row alone, each prefill segment. */
function unitsOf(g: StepGraph): Units {
  return { decode: g.D, segments: g.layout.segments };
}

/** x += rmsNorm(src) · weight on every row (Gemma's norms of a sublayer's output; src f32). */
export async function addNorm(g: StepGraph, src: ActName, weight: GPUBuffer): Promise<void> {
  const { acts, dims } = g.res;
  await rmsNorm(g.ctx, {
    x: g.buffer(src),
    weight,
    y: acts.x,
    R: g.R,
    H: dims.hidden,
    eps: dims.eps,
    add: true,
  });
}

/** attn ·= sigmoid(gate) on every row (the gate's logits written by a linear into "gate"). */
export async function gateOutput(g: StepGraph): Promise<void> {
  const d = g.res.dims;
  await sigmoidGate(g.ctx, { gate: g.buffer("gate"), y: g.res.acts.attn, R: g.R, W: d.nq * d.hd });
}

export interface DeltaNetWeights {
  /** [q | k | v | z | b | a] from the normed input (mixWidth columns). */
  in_proj: LinearGroup;
  /** conv1d.weight as (C, KC) f32. */
  conv1d: GPUBuffer;
  A_log: GPUBuffer;
  dt_bias: GPUBuffer;
  /** The gated RMSNorm's weight (dv). */
  norm: GPUBuffer;
  out_proj: LinearGroup;
}

/** A gated DeltaNet token mixer: x += out_proj(norm(delta_rule(conv(q, k, v))) · silu(z)). */
export async function deltaNet(
  g: StepGraph,
  layer: number,
  ln: GPUBuffer,
  w: DeltaNetWeights,
): Promise<void> {
  const dn = g.res.acts.hybrid;
  const shape = g.res.hybrid?.deltanet;
  const state = g.res.recurrent?.layers[layer];
  if (!shape || !state?.delta || !dn.mix || !dn.mixWidth) {
    throw new ShapeError(`layer ${layer}: no gated DeltaNet state or buffers`);
  }
  const { nk, nv, dk, dv, convKernel } = shape;
  const C = 2 * nk * dk + nv * dv;
  const units = unitsOf(g);
  const rows = g.res.acts.rows;
  await g.normLinear(ln, w.in_proj, "mix");
  await causalConv(g.ctx, {
    src: dn.mix,
    lds: dn.mixWidth,
    srcF32: true,
    C,
    KC: convKernel,
    cols: { x: 0 },
    weight: w.conv1d,
    state: state.conv,
    y: g.buffer("conv"),
    act: "silu",
    rows,
    units,
  });
  await gatedDelta(g.ctx, {
    conv: g.buffer("conv"),
    src: dn.mix,
    lds: dn.mixWidth,
    srcF32: true,
    zOff: C,
    bOff: C + nv * dv,
    aOff: C + nv * dv + nv,
    aLog: w.A_log,
    dtBias: w.dt_bias,
    norm: w.norm,
    eps: g.res.dims.eps,
    state: state.delta,
    out: g.buffer("delta"),
    nk,
    nv,
    dk,
    dv,
    rows,
    units,
    ...(dn.deltaScratch ? { scratch: dn.deltaScratch } : {}),
  });
  await g.linear("delta", w.out_proj, "x");
}

export interface ShortConvWeights {
  /** [B | C | x] (3·hidden columns). */
  in_proj: LinearGroup;
  /** conv.weight as (hidden, KC) f32. */
  conv: GPUBuffer;
  out_proj: LinearGroup;
}

/** LFM2's short-conv token mixer: x += out_proj(C · conv(B · x)). */
export async function shortConv(
  g: StepGraph,
  layer: number,
  ln: GPUBuffer,
  w: ShortConvWeights,
): Promise<void> {
  const h = g.res.acts.hybrid;
  const state = g.res.recurrent?.layers[layer];
  const kernel = g.res.hybrid?.shortConv?.convKernel;
  if (!state || !kernel || !h.mix || !h.mixWidth) throw new ShapeError(`layer ${layer}: no conv state`);
  const H = g.res.dims.hidden;
  await g.normLinear(ln, w.in_proj, "mix");
  await causalConv(g.ctx, {
    src: h.mix,
    lds: h.mixWidth,
    srcF32: true,
    C: H,
    KC: kernel,
    cols: { x: 2 * H, inGate: 0, outGate: H },
    weight: w.conv,
    state: state.conv,
    y: g.buffer("conv"),
    act: "none",
    rows: g.res.acts.rows,
    units: unitsOf(g),
  });
  await g.linear("conv", w.out_proj, "x");
}

export interface MoeWeights {
  /** Router logits (E). */
  gate: LinearGroup;
  /** Every expert's [gate | up] (N = 2·I) and down (N = hidden). */
  gate_up: ExpertLinear;
  down: ExpertLinear;
  /** Qwen3-Next's shared expert: a dense SwiGLU MLP scaled by sigmoid(x · shared_gate). */
  shared?: { gate_up: LinearGroup; down: LinearGroup; gate: LinearGroup };
}

/**
 * x += Σ_j p_j · expert_j(n) (+ sigmoid(n · w_s) · shared(n)), n = rmsNorm(x) · ln: the router's top-k
 * experts per row, weights renormalised when the model says so. Decode rows fuse the norm into the router,
 * the shared expert and the experts' gate|up (with the top-k, for a lone decode row on the int8-x path),
 * and the weighted sum into the experts' down (a layer is three or four dispatches without a shared
 * expert); prefill rows group their rows by expert for tiled matmuls.
 */
export async function moe(g: StepGraph, ln: GPUBuffer, w: MoeWeights): Promise<void> {
  const m = g.res.acts.hybrid.moe;
  const spec = g.res.hybrid?.moe;
  if (!m || !spec) throw new ShapeError("MoE buffers were not allocated for this model");
  const k = spec.topK;
  const E = spec.experts;
  const { acts, dims } = g.res;
  const P = g.R - g.D;
  const normed = { prefillNormed: true };
  if (P > 0) await g.prefillNorm(ln);
  await g.normLinear(ln, w.gate, "router", { ...normed, int8AnySize: g.ctx.gpu.profile.moe.routerInt8X });
  // A lone decode row is routed inside its experts' gate|up (one dispatch less); other rows here.
  const fuse = g.D === 1 && moeGateUpRoutes(g.ctx.gpu, w.gate_up, k);
  const route = { logits: m.router, ids: m.ids, weights: m.weights, E, k, renormalize: spec.renormalize };
  if (!fuse) await moeRoute(g.ctx, { ...route, R: g.R, row0: 0 });
  else if (P > 0) await moeRoute(g.ctx, { ...route, R: P, row0: g.D });
  let shared: { y: GPUBuffer; gate: GPUBuffer } | undefined;
  if (w.shared) {
    await g.normSwiGLU(ln, w.shared.gate_up, "silu", normed);
    await g.linear("h", w.shared.down, "shared");
    await g.normLinear(ln, w.shared.gate, "sharedGate", normed);
    shared = { y: m.shared, gate: m.sharedGate };
  }
  const common = { ids: m.ids, k };
  if (g.D > 0) {
    const rows = { M: g.D, row0: 0, mode: "vec" as const };
    const norm = { weight: ln, eps: dims.eps };
    const { gateUpLanes, downLanes } = g.ctx.gpu.profile.moe;
    const up = gateUpLanes ? { lanes: gateUpLanes } : {};
    const routed = fuse
      ? { route: { logits: m.router, weights: m.weights, E, renormalize: spec.renormalize } }
      : {};
    await moeGateUp(g.ctx, { ...common, ...rows, ...up, ...routed, x: acts.x, w: w.gate_up, h: m.h, norm });
    const sum = { weights: m.weights, x: acts.x, ...(shared ? { shared } : {}) };
    const down = { ...common, ...rows, ...(downLanes ? { lanes: downLanes } : {}), h: m.h, w: w.down };
    if (moeDownCanCombine(g.ctx.gpu, w.down, !!shared)) {
      await moeDown(g.ctx, { ...down, combine: sum });
    } else {
      // A stack split across buffers: per-pair outputs, then the weighted sum.
      await moeDown(g.ctx, { ...down, y: m.y });
      await moeCombine(g.ctx, { ...sum, y: m.y, M: g.D, row0: 0, k, H: dims.hidden });
    }
  }
  if (P > 0) {
    const rows = { M: P, row0: g.D, mode: "tiled" as const, groups: m.groups };
    await moeGroup(g.ctx, { ids: m.ids, M: P, row0: g.D, k, E, groups: m.groups });
    await moeGateUp(g.ctx, { ...common, ...rows, x: acts.xn, w: w.gate_up, h: m.h });
    await moeDown(g.ctx, { ...common, ...rows, h: m.h, w: w.down, y: m.y });
    await moeCombine(g.ctx, {
      y: m.y,
      weights: m.weights,
      x: acts.x,
      M: P,
      row0: g.D,
      k,
      H: dims.hidden,
      ...(shared ? { shared } : {}),
    });
  }
}
