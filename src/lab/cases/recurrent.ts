/**
 * Lab cases of the recurrent token mixers through src/ops/recurrent.ts: `causal_conv.wgsl` (`causalConv`,
 * the Qwen3-Next form and the LFM2 gated form), `gated_delta.wgsl` (`gatedDelta` without scratch: every unit
 * recurrent) and its chunked form `gated_delta_chunk_{wy,state,out}.wgsl` (`gatedDelta` with scratch:
 * prefill segments chunked, decode units recurrent). A step holds D decode units (even ones continue a
 * sequence from a random state, odd ones start at pos 0), a segment continuing from a random state (at a
 * random position, so mostly mid-chunk), and a segment starting at pos 0; `split` records the continuing
 * segment as several segments in successive dispatches. Every slot starts random (a new sequence must
 * ignore its slot) and the whole state pool is compared, including a slot no unit owns.
 * @module
 */
import { ShapeError } from "../../errors.ts";
import { causalConv, deltaScratchBytes, gatedDelta, type Units } from "../../ops/recurrent.ts";
import type { Gpu } from "../../gpu/device.ts";
import {
  type CaseEnv,
  type CaseInputs,
  compareAll,
  type Cost,
  int,
  type KernelCase,
  oneOf,
  type Shape,
} from "../case.ts";
import type { Tolerance } from "../compare.ts";
import { type Bound, BufferSet, readF32, seal } from "../harness.ts";
import { actBytesOf, type ActDtype, encodeAct, roundAct } from "../ref/half.ts";
import { encodeRows, type Row } from "../ref/paged.ts";
import {
  causalConvRef,
  type CausalConvRefArgs,
  gatedDeltaRef,
  type GatedDeltaRefArgs,
} from "../ref/recurrent.ts";
import type { Rng } from "../rng.ts";

const STEP_KEYS = {
  D: "decode units (one row each; even ones continue a sequence, odd ones start at pos 0)",
  S: "rows of the segment continuing a sequence from a random state (≥ 7 with split)",
  S0: "rows of the segment starting at pos 0",
  split: "1: the continuing segment as segments of 5, 1 and the rest, in successive dispatches; 2: cut " +
    "before every row whose position is a multiple of `chunk`",
};

export interface Step {
  rows: Row[];
  units: Units;
  /** Slots in the state pool: one per unit plus one no unit owns. */
  slots: number;
}

/** The step's rows and units; its draws do not depend on `split`, so split and whole runs share inputs. */
export function makeStep(shape: Shape, rng: Rng): Step {
  const D = int(shape, "D", 0), S = int(shape, "S", 0), S0 = int(shape, "S0", 0);
  const split = int(shape, "split", 0);
  if (split === 1 && S < 7) throw new ShapeError(`recurrent step: split needs S ≥ 7, got ${S}`);
  if (split > 2) throw new ShapeError(`recurrent step: split = ${split} (0, 1 or 2)`);
  const slots = D + 3;
  const slot = rng.permutation(slots);
  const rows: Row[] = Array.from({ length: D }, (_, r) => ({
    token: rng.int(0, 1000),
    pos: r % 2 ? 0 : rng.int(1, 300),
    slot: slot[r],
    kind: 1,
  }));
  const p0 = rng.int(1, 500);
  for (let i = 0; i < S; i++) rows.push({ token: rng.int(0, 1000), pos: p0 + i, slot: slot[D], kind: 0 });
  for (let i = 0; i < S0; i++) rows.push({ token: rng.int(0, 1000), pos: i, slot: slot[D + 1], kind: 0 });
  // Cuts (rows into the continuing segment): 5 and 6, or every row whose position is a multiple of chunk.
  const cuts = split === 1 ? [5, 6] : [];
  if (split === 2) {
    const chunk = int(shape, "chunk");
    for (let i = 1; i < S; i++) if ((p0 + i) % chunk === 0) cuts.push(i);
  }
  const ends = [0, ...cuts, S];
  const a = ends.slice(1).map((e, k) => ({ row0: D + ends[k], len: e - ends[k] }));
  return { rows, units: { decode: D, segments: [...a, { row0: D + S, len: S0 }] }, slots };
}

const f32s = (n: number, f: () => number) => Float64Array.from({ length: n }, () => Math.fround(f()));

// ---- causal_conv.wgsl ----

/**
 * causalConvRef's arguments as the case draws them: src act (R, lds), weight (C, KC) f32, state0
 * (slots, KC−1, C) f32, y0 (R, C) f32 before the kernel.
 */
export interface CausalConvInputs extends CaseInputs, Step, CausalConvRefArgs {}

/**
 * Inputs are exact on both paths (act src, f32 weights and state): y is an f32 sum of KC products of O(1)
 * values (+ silu, + the gate product), a few ulp of Σ|w·u| ≤ ~3. The state holds inputs: exact, or the
 * one rounding of the gate product x·B in f32 (f16 halves multiply exactly).
 */
function convTol(_act: ActDtype): Record<string, Tolerance> {
  return { y: { atol: 1e-6, rtol: 2e-6 }, state: { atol: 0, rtol: 1.2e-7 } };
}

export const causalConvCase: KernelCase<CausalConvInputs> = {
  files: ["causal_conv.wgsl"],
  summary: "causal depthwise conv1d over each sequence's rows with a rolling state (optional gates, silu)",
  // Qwen3-Next: conv over [q | k | v], 2·16·128 + 32·128 channels, width 4.
  defaults: { C: 8192, KC: 4, gated: 0, fn: "silu", x: 0, D: 8, S: 512, S0: 64, split: 0 },
  small: { C: 37, KC: 4, gated: 0, fn: "silu", x: 3, D: 2, S: 23, S0: 9, split: 0 },
  keys: {
    C: "channels",
    KC: "kernel width (2..8)",
    gated: "1: LFM2 form, src = [B | C | x] (3C): u = B·x, y = C·conv(u)",
    fn: "activation: silu | none",
    x: "(not gated) src column of channel 0 (src rows are x + C + 2 wide)",
    ...STEP_KEYS,
  },
  make(shape, rng, env) {
    const C = int(shape, "C"), KC = int(shape, "KC", 2);
    const step = makeStep(shape, rng);
    const gated = int(shape, "gated", 0) === 1;
    const lds = gated ? 3 * C : int(shape, "x", 0) + C + 2;
    const cols = gated ? { x: 2 * C, inGate: 0, outGate: C } : { x: int(shape, "x", 0) };
    const R = step.rows.length;
    return {
      shape,
      act: env.act,
      ...step,
      C,
      KC,
      lds,
      cols,
      fn: oneOf(shape, "fn", ["silu", "none"] as const),
      src: Float64Array.from({ length: R * lds }, () => roundAct(rng.signed(2), env.act)),
      weight: f32s(C * KC, () => rng.signed(0.6)),
      state0: f32s(step.slots * (KC - 1) * C, () => rng.signed(2)),
      y0: f32s(R * C, () => rng.signed(1)),
    };
  },
  async bind(gpu, i) {
    const set = new BufferSet(gpu);
    const state = set.upload("state", Float32Array.from(i.state0), { mutable: true });
    const y = set.upload("y", Float32Array.from(i.y0), { mutable: true });
    const ctx = set.context();
    await causalConv(ctx, {
      src: set.upload("src", encodeAct(i.src, i.act)),
      lds: i.lds,
      C: i.C,
      KC: i.KC,
      cols: i.cols,
      weight: set.upload("weight", Float32Array.from(i.weight)),
      state,
      y,
      act: i.fn,
      rows: set.upload("rows", encodeRows(i.rows)),
      units: i.units,
    });
    return seal(set, ctx, { maxKvLen: 1 }, async () => ({
      y: await readF32(gpu, y, i.y0.length),
      state: await readF32(gpu, state, i.state0.length),
    }));
  },
  check: (got, i) => compareAll(got, causalConvRef(i), convTol(i.act)),
  tolerance: (_s, act) => convTol(act),
  cost(shape, act) {
    const C = Number(shape.C), KC = Number(shape.KC);
    const R = Number(shape.D) + Number(shape.S) + Number(shape.S0);
    const units = Number(shape.D) + 2;
    const reads = shape.gated ? 3 : 1;
    return {
      bytes: R * C * (reads * actBytesOf(act) + 4) + C * KC * 4 + 2 * units * (KC - 1) * C * 4,
      flops: R * C * 2 * KC,
    };
  },
};

// ---- gated_delta.wgsl, gated_delta_chunk_{wy,state,out}.wgsl ----

/**
 * gatedDeltaRef's arguments as the case draws them: conv f32 (R, 2·nk·dk + nv·dv), src act (R, lds)
 * [pad 3 | z (nv·dv) | b (nv) | a (nv) | pad 2], state0 (slots, nv, dk, dv) f32, out0 (R, nv·dv) f32
 * before the kernel; `chunk`: the chunked form's chunk length (0: recurrent segments).
 */
export interface GatedDeltaInputs extends CaseInputs, Step, GatedDeltaRefArgs {
  chunk: number;
}

/**
 * Both paths read exact inputs (f32 conv, act z/a/b) and compute alike in f32. The state takes ~30 serial
 * updates of f32 dot products over dk (|S| ~ 1); out is o over its RMS, so o's rounding relative to
 * rms(o) reaches it, times norm·silu(z) ≤ 1.5·4. The chunked form sums the same quantities in another
 * order, through T = (I + A)⁻¹ over ≤ 64 slots (|A_ij| ≤ 1) and decays e^(Σ g) summed per pair; its
 * measured errors are within 1.3× of the recurrent kernel's on the same inputs (Qwen3-Next heads, 256 rows:
 * out 0.44 of this vs 0.35, state 0.14 vs 0.17), so it is held to the same tolerance.
 */
function deltaTol(): Record<string, Tolerance> {
  return { out: { atol: 2e-5, rtol: 1e-4 }, state: { atol: 2e-6, rtol: 2e-5 } };
}

const DELTA_KEYS = {
  nk: "key heads",
  nv: "value heads (a multiple of nk)",
  dk: "key head dim",
  dv: "value head dim",
  ...STEP_KEYS,
};

function makeDelta(shape: Shape, rng: Rng, env: CaseEnv, chunk: number): GatedDeltaInputs {
  const nk = int(shape, "nk"), nv = int(shape, "nv"), dk = int(shape, "dk"), dv = int(shape, "dv");
  const step = makeStep(shape, rng);
  const R = step.rows.length;
  const width = 2 * nk * dk + nv * dv;
  // Rows of q/k at different scales: the l2 norms must remove them.
  const conv = new Float64Array(R * width);
  for (let r = 0; r < R; r++) {
    const amp = 2 ** rng.int(-3, 3);
    for (let e = 0; e < width; e++) {
      conv[r * width + e] = Math.fround(rng.signed(e < 2 * nk * dk ? amp : 1));
    }
  }
  const zOff = 3, bOff = zOff + nv * dv, aOff = bOff + nv, lds = aOff + nv + 2;
  // a over ±3 with dtBias in (−6, −2) and e^aLog in (0.5, 8): g from about −1e-4 (slow) to −10 (wiped).
  const src = Float64Array.from({ length: R * lds }, (_, e) => {
    const c = e % lds;
    return roundAct(rng.signed(c >= zOff && c < aOff ? 4 : 3), env.act);
  });
  return {
    shape,
    act: env.act,
    ...step,
    chunk,
    nk,
    nv,
    dk,
    dv,
    conv,
    src,
    lds,
    zOff,
    bOff,
    aOff,
    aLog: f32s(nv, () => Math.log(rng.range(0.5, 8))),
    dtBias: f32s(nv, () => rng.range(-6, -2)),
    norm: f32s(dv, () => rng.range(0.5, 1.5)),
    eps: Math.fround(1e-6),
    state0: f32s(step.slots * nv * dk * dv, () => rng.signed(0.5)),
    out0: f32s(R * nv * dv, () => rng.signed(1)),
  };
}

async function bindDelta(gpu: Gpu, i: GatedDeltaInputs): Promise<Bound> {
  const set = new BufferSet(gpu);
  const state = set.upload("state", Float32Array.from(i.state0), { mutable: true });
  const out = set.upload("out", Float32Array.from(i.out0), { mutable: true });
  const segs = i.units.segments.filter((s) => s.len > 0);
  const rows = segs.reduce((n, s) => n + s.len, 0);
  // A NaN-filled scratch: a read of anything the chunked kernels did not write poisons the outputs.
  const scratch = i.chunk > 0
    ? set.scratch("delta_scratch", deltaScratchBytes(i, i.chunk, rows, segs.length))
    : undefined;
  const ctx = set.context();
  const { lds, zOff, bOff, aOff, eps, nk, nv, dk, dv, units } = i;
  await gatedDelta(ctx, {
    lds,
    zOff,
    bOff,
    aOff,
    eps,
    nk,
    nv,
    dk,
    dv,
    units,
    conv: set.upload("conv", Float32Array.from(i.conv)),
    src: set.upload("src", encodeAct(i.src, i.act)),
    aLog: set.upload("a_log", Float32Array.from(i.aLog)),
    dtBias: set.upload("dt_bias", Float32Array.from(i.dtBias)),
    norm: set.upload("norm", Float32Array.from(i.norm)),
    state,
    out,
    rows: set.upload("rows", encodeRows(i.rows)),
    scratch,
    chunk: i.chunk || undefined,
  });
  return seal(set, ctx, { maxKvLen: 1 }, async () => ({
    out: await readF32(gpu, out, i.out0.length),
    state: await readF32(gpu, state, i.state0.length),
  }));
}

/** Each unit reads and writes its heads' state once; rows read q, k, v, z and write out. */
function deltaCost(shape: Shape, act: ActDtype): Cost {
  const nk = Number(shape.nk), nv = Number(shape.nv), dk = Number(shape.dk), dv = Number(shape.dv);
  const R = Number(shape.D) + Number(shape.S) + Number(shape.S0);
  const units = Number(shape.D) + 2;
  return {
    bytes: 2 * units * nv * dk * dv * 4 +
      R * ((2 * nk * dk + nv * dv) * 4 + nv * dv * (actBytesOf(act) + 4)),
    flops: R * nv * dk * dv * 7,
  };
}

export const gatedDeltaCase: KernelCase<GatedDeltaInputs> = {
  files: ["gated_delta.wgsl"],
  summary: "gated delta rule (recurrent, per sequence) + gated RMSNorm, Qwen3-Next linear attention",
  // Qwen3-Next-80B-A3B linear attention: 16 key / 32 value heads of 128.
  defaults: { nk: 16, nv: 32, dk: 128, dv: 128, D: 8, S: 256, S0: 32, split: 0 },
  small: { nk: 2, nv: 4, dk: 16, dv: 16, D: 2, S: 23, S0: 9, split: 0 },
  keys: DELTA_KEYS,
  make: (shape, rng, env) => makeDelta(shape, rng, env, 0),
  bind: bindDelta,
  check: (got, i) => compareAll(got, gatedDeltaRef(i), deltaTol()),
  tolerance: () => deltaTol(),
  cost: deltaCost,
};

/**
 * The chunked form: decode units still take gated_delta.wgsl, each prefill segment the three chunk kernels
 * (the defaults: one 2048-row prefill chunk of Qwen3-Next continuing a sequence, no decode rows).
 */
export const gatedDeltaChunkCase: KernelCase<GatedDeltaInputs> = {
  files: ["gated_delta_chunk_wy.wgsl", "gated_delta_chunk_state.wgsl", "gated_delta_chunk_out.wgsl"],
  summary: "gated delta rule, chunked (WY) form of prefill segments + gated RMSNorm (Qwen3-Next)",
  defaults: { nk: 16, nv: 32, dk: 128, dv: 128, chunk: 64, D: 0, S: 2048, S0: 0, split: 0 },
  small: { nk: 2, nv: 4, dk: 16, dv: 16, chunk: 16, D: 2, S: 41, S0: 9, split: 0 },
  keys: { ...DELTA_KEYS, chunk: "chunk length: 16, 32 or 64 (positions; chunks start at its multiples)" },
  make: (shape, rng, env) => makeDelta(shape, rng, env, int(shape, "chunk")),
  bind: bindDelta,
  check: (got, i) => compareAll(got, gatedDeltaRef(i), deltaTol()),
  tolerance: () => deltaTol(),
  cost(shape, act) {
    // Per chunk and head: K·Kᵀ and Q·Kᵀ (C²·dk each), T (C³/6), W | U (C²·(dk + dv)), W·S, Kᵀ·V' and
    // Q·S (C·dk·dv each), P·V' (C²·dv); plus the scratch written and read (W | U twice, hs twice).
    const base = deltaCost(shape, act);
    const nv = Number(shape.nv), dk = Number(shape.dk), dv = Number(shape.dv), C = Number(shape.chunk);
    const chunks = Math.ceil((Number(shape.S) + Number(shape.S0)) / C) + 2;
    const macs = 2 * C * C * dk + C ** 3 / 6 + C * C * (dk + dv) + 3 * C * dk * dv + C * C * dv;
    const scratch = chunks * nv * (3 * C * (dk + dv) + 2 * dk * dv) * 4;
    return { bytes: base.bytes + scratch, flops: chunks * nv * 2 * macs };
  },
};
