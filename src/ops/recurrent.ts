/**
 * Host wrappers of the recurrent token mixers: the causal depthwise conv1d with a rolling per-sequence state
 * (`causal_conv.wgsl`: Qwen3-Next / Qwen3.5 gated DeltaNet, LFM2 short conv) and the gated delta rule with
 * its gated RMSNorm. Both run per unit (one sequence's consecutive rows): the step's decode rows (each its
 * own unit of one row) in one dispatch, then each prefill segment. A unit whose first row has pos 0 starts
 * from a zero state; otherwise it reads the state at that row's slot, and it writes the state back after its
 * last row. The conv and the recurrent delta kernel (`gated_delta.wgsl`) give the one-pass result bitwise
 * however the rows are split into units. Prefill segments of the delta rule take its chunked (WY) form
 * (`gated_delta_chunk_{wy,state,out}.wgsl`) when given scratch: chunks are aligned to absolute positions, so
 * a prefill split at a multiple of the chunk length is bitwise one pass; split elsewhere, or decoded token
 * by token, it agrees within f32 rounding.
 * @module
 */
import type { Defines } from "../gpu/preprocess.ts";
import { check, type OpContext, record } from "./context.ts";

/** The sequences of a step: D decode rows (rows 0..D−1, one unit each), then prefill segments. */
export interface Units {
  decode: number;
  segments: readonly { row0: number; len: number }[];
}

/** One dispatch per unit group: `count` units of `len` rows from `row0`. */
function unitGroups(u: Units): { row0: number; len: number; count: number }[] {
  const g = u.decode > 0 ? [{ row0: 0, len: 1, count: u.decode }] : [];
  for (const s of u.segments) if (s.len > 0) g.push({ row0: s.row0, len: s.len, count: 1 });
  return g;
}

function nextPow2(n: number): number {
  return 2 ** Math.ceil(Math.log2(Math.max(1, n)));
}

export interface CausalConvArgs {
  /** (R, lds) act, or f32 with `srcF32`. */
  src: GPUBuffer;
  lds: number;
  srcF32?: boolean;
  /** Channels. */
  C: number;
  /** Kernel width (2..8): the weight's columns. */
  KC: number;
  /** src columns of channel 0: the input x, and optional input/output gates (LFM2: B and C). */
  cols: { x: number; inGate?: number; outGate?: number };
  /** (C, KC) f32, HF conv1d.weight [C, 1, KC] squeezed: weight[c, KC−1] multiplies the current token. */
  weight: GPUBuffer;
  /** (slots, KC−1, C) f32: the last KC−1 conv inputs of each sequence, oldest first. */
  state: GPUBuffer;
  /** (R, C) f32. */
  y: GPUBuffer;
  act: "silu" | "none";
  /** (R) step rows: pos and slot of each unit's first row. */
  rows: GPUBuffer;
  units: Units;
}

/**
 * y[t, c] = act(Σ_i weight[c, i] · u[t − (KC−1) + i, c]) · (outGate ? src[t, outGate + c] : 1), with
 * u[t, c] = src[t, x + c] · (inGate ? src[t, inGate + c] : 1) and inputs before a unit from its state.
 *
 * @example Qwen3-Next: `causalConv(ctx, { src: qkv, lds: C, C, KC: 4, cols: { x: 0 }, act: "silu", ... })`;
 * LFM2 (in_proj output [B | C | x]): `cols: { x: 2 * H, inGate: 0, outGate: H }, act: "none", KC: 3`.
 */
export async function causalConv(ctx: OpContext, a: CausalConvArgs): Promise<void> {
  const { C, KC, cols } = a;
  check(Number.isInteger(KC) && KC >= 2 && KC <= 8, "causalConv", `KC=${KC} (2..8)`);
  const last = Math.max(cols.x, cols.inGate ?? 0, cols.outGate ?? 0) + C;
  check(C >= 1 && last <= a.lds, "causalConv", `C=${C} cols=${JSON.stringify(cols)} lds=${a.lds}`);
  const WG = 256;
  const defines = {
    KC,
    ...(a.act === "silu" ? { SILU: 1 } : {}),
    ...(cols.inGate !== undefined ? { IN_GATE: 1 } : {}),
    ...(cols.outGate !== undefined ? { OUT_GATE: 1 } : {}),
    ...(a.srcF32 ? { SRC_F32: 1 } : {}),
  };
  const spec = { file: "causal_conv.wgsl", defines, overrides: { WG } };
  for (const g of unitGroups(a.units)) {
    // Long units get several lanes per channel (each a contiguous run of tokens); a row takes one lane.
    const tl = Math.min(8, 2 ** Math.floor(Math.log2(Math.max(1, Math.floor(g.len / 4)))));
    await record(ctx, spec, {
      buffers: { rows: a.rows, src: a.src, weight: a.weight, state: a.state, y: a.y },
      params: {
        row0: g.row0,
        len: g.len,
        C,
        lds: a.lds,
        x: cols.x,
        in_gate: cols.inGate ?? 0,
        out_gate: cols.outGate ?? 0,
        tl,
      },
      grid: [Math.ceil(C / (WG / tl)), g.count, 1],
    });
  }
}

export interface GatedDeltaArgs {
  /** (R, 2·nk·dk + nv·dv) f32: [q | k | v] after the conv, heads contiguous. */
  conv: GPUBuffer;
  /** (R, lds) act (f32 with `srcF32`): z at zOff + h·dv + j, b at bOff + h, a at aOff + h. */
  src: GPUBuffer;
  lds: number;
  srcF32?: boolean;
  zOff: number;
  bOff: number;
  aOff: number;
  /** (nv) f32 each. */
  aLog: GPUBuffer;
  dtBias: GPUBuffer;
  /** (dv) f32, the gated RMSNorm weight (plain, not 1 + w). */
  norm: GPUBuffer;
  eps: number;
  /** (slots, nv, dk, dv) f32. */
  state: GPUBuffer;
  /** (R, nv·dv) f32. */
  out: GPUBuffer;
  nk: number;
  nv: number;
  dk: number;
  dv: number;
  /** (R) step rows: pos and slot of each unit's first row. */
  rows: GPUBuffer;
  units: Units;
  /**
   * Scratch of the chunked form, at least `deltaScratchLayout(...).bytes` for these segments: with it,
   * prefill segments take the chunked (WY) form; without it, the recurrent kernel as decode rows do.
   */
  scratch?: GPUBuffer;
  /** Chunk length of the chunked form: 16, 32 or 64 (default `deltaChunkLen`). */
  chunk?: number;
}

type DeltaShape = Pick<GatedDeltaArgs, "nv" | "dk" | "dv">;
/** A range of a buffer, in bytes. */
interface Region {
  offset: number;
  size: number;
}

/** Columns of S per state-pass workgroup. */
const BV = 16;

/** Workgroup bytes of the chunked form's kernels at chunk length C (the largest of the three). */
function chunkWorkgroupBytes(C: number, dk: number, dv: number): number {
  const wy = C * C + C * (1024 / C + 1) + 4 * C;
  const state = dk * BV + C * BV + C;
  const out = C * C + C * 9 + 8 * 16 * Math.ceil(dv / 16) + 4 * C;
  return 4 * Math.max(wy, state, out);
}

/** The chunk length of the chunked form on a device: 64 where its workgroup memory fits, else 32 or 16. */
export function deltaChunkLen(info: { maxWorkgroupStorage: number }, dk: number, dv: number): number {
  return [64, 32].find((C) => chunkWorkgroupBytes(C, dk, dv) <= info.maxWorkgroupStorage) ?? 16;
}

/** Scratch chunks of a segment at most: it may start anywhere in a chunk. */
const segmentChunks = (len: number, C: number) => Math.ceil((len + C - 1) / C);

/**
 * Regions of the chunked form's scratch for `chunks` chunks (offsets in bytes, `align`ed): wu (chunks, nv,
 * C, dk + dv) f32, aux (chunks, nv, C) vec4<f32>, hs (chunks, nv, dk, dv) f32.
 */
export function deltaScratchLayout(
  s: DeltaShape,
  C: number,
  chunks: number,
  align = 256,
): { wu: Region; aux: Region; hs: Region; bytes: number } {
  const up = (n: number) => Math.ceil(n / align) * align;
  const wu = { offset: 0, size: chunks * s.nv * C * (s.dk + s.dv) * 4 };
  const aux = { offset: up(wu.size), size: chunks * s.nv * C * 16 };
  const hs = { offset: aux.offset + up(aux.size), size: chunks * s.nv * s.dk * s.dv * 4 };
  return { wu, aux, hs, bytes: hs.offset + hs.size };
}
/** Scratch bytes for steps of at most `rows` prefill rows in at most `segments` segments. */
export function deltaScratchBytes(s: DeltaShape, C: number, rows: number, segments = 1): number {
  return deltaScratchLayout(s, C, Math.floor(rows / C) + 2 * segments).bytes;
}

/**
 * The gated delta rule over each unit's tokens in order (value head h reads key head h / (nv/nk)), then
 * out = o · rsqrt(mean(o²) + eps) · norm · silu(z) per row and head. Math: the header of gated_delta.wgsl.
 * Decode rows take the recurrent kernel; prefill segments the chunked form when `scratch` is given
 * (gated_delta_chunk_wy → _state → _out per segment, chunks aligned to absolute positions).
 */
export async function gatedDelta(ctx: OpContext, a: GatedDeltaArgs): Promise<void> {
  const { nk, nv, dk, dv } = a;
  check(nk >= 1 && nv % nk === 0, "gatedDelta", `nv=${nv} is not a multiple of nk=${nk}`);
  check(dk >= 1 && dk <= 256 && dv >= 1 && dv <= 256, "gatedDelta", `dk=${dk} dv=${dv} (1..256)`);
  const last = Math.max(a.zOff + nv * dv, a.bOff + nv, a.aOff + nv);
  check(last <= a.lds, "gatedDelta", `z/b/a columns end at ${last} > lds=${a.lds}`);
  if (!a.scratch) {
    for (const g of unitGroups(a.units)) await recurrent(ctx, a, g);
    return;
  }
  const C = a.chunk ?? deltaChunkLen(ctx.gpu.info, dk, dv);
  check([16, 32, 64].includes(C), "gatedDelta", `chunk=${C} (16, 32 or 64)`);
  if (a.units.decode > 0) await recurrent(ctx, a, { row0: 0, len: 1, count: a.units.decode });
  const segs = a.units.segments.filter((s) => s.len > 0);
  const chunks = segs.reduce((n, s) => n + segmentChunks(s.len, C), 0);
  const lay = deltaScratchLayout(a, C, chunks, ctx.gpu.info.storageAlign);
  const scratch = a.scratch;
  check(lay.bytes <= scratch.size, "gatedDelta", `scratch of ${scratch.size} bytes < ${lay.bytes}`);
  const big = Math.max(lay.wu.size, lay.hs.size);
  check(big <= ctx.gpu.info.maxBinding, "gatedDelta", `scratch region of ${big} bytes > maxBinding`);
  const region = (r: Region) => ({ buffer: scratch, offset: r.offset, size: r.size });
  const [wu, aux, hs] = [region(lay.wu), region(lay.aux), region(lay.hs)];
  const srcF32: Defines = a.srcF32 ? { SRC_F32: 1 } : {};
  let cbase = 0;
  for (const s of segs) {
    const nc = segmentChunks(s.len, C);
    const seg = { row0: s.row0, len: s.len, cbase, nk, nv, dv };
    await record(ctx, { file: "gated_delta_chunk_wy.wgsl", defines: { C, DK: dk, ...srcF32 } }, {
      buffers: { rows: a.rows, conv: a.conv, src: a.src, a_log: a.aLog, dt_bias: a.dtBias, wu, aux },
      params: { ...seg, lds: a.lds, b_off: a.bOff, a_off: a.aOff, scale: 1 / Math.sqrt(dk) },
      grid: [nc, nv, 1],
    });
    await record(ctx, { file: "gated_delta_chunk_state.wgsl", defines: { C, DK: dk, BV } }, {
      buffers: { rows: a.rows, conv: a.conv, wu, aux, state: a.state, hs },
      params: seg,
      grid: [Math.ceil(dv / BV), nv, 1],
    });
    const JN = Math.ceil(dv / 16);
    await record(ctx, { file: "gated_delta_chunk_out.wgsl", defines: { C, DK: dk, JN, ...srcF32 } }, {
      buffers: { rows: a.rows, conv: a.conv, src: a.src, norm: a.norm, wu, aux, hs, out: a.out },
      params: { ...seg, lds: a.lds, z_off: a.zOff, eps: a.eps },
      grid: [nc, nv, 1],
    });
    cbase += nc;
  }
}

/** One dispatch of the recurrent kernel (gated_delta.wgsl) over a unit group. */
async function recurrent(
  ctx: OpContext,
  a: GatedDeltaArgs,
  g: { row0: number; len: number; count: number },
): Promise<void> {
  const { nk, nv, dk, dv } = a;
  // A workgroup holds the whole head: dv padded to a power of two, the rest of its lanes split dk (fewer S
  // values a lane: its private array stays in registers).
  const DVP = Math.max(8, nextPow2(dv));
  const lanes = Math.min(ctx.gpu.profile.deltaNet.recurrentWorkgroupSize, ctx.gpu.info.maxInvocations);
  const P = Math.max(1, Math.min(8, 2 ** Math.floor(Math.log2(lanes / DVP)), 2 ** Math.floor(Math.log2(dk))));
  const spec = {
    file: "gated_delta.wgsl",
    defines: { DK: dk, P, ...(a.srcF32 ? { SRC_F32: 1 } : {}) },
    overrides: { WG: P * DVP, DVP, TS: 8 },
  };
  await record(ctx, spec, {
    buffers: {
      rows: a.rows,
      conv: a.conv,
      src: a.src,
      a_log: a.aLog,
      dt_bias: a.dtBias,
      norm: a.norm,
      state: a.state,
      out: a.out,
    },
    params: {
      row0: g.row0,
      len: g.len,
      nk,
      nv,
      dv,
      lds: a.lds,
      z_off: a.zOff,
      b_off: a.bOff,
      a_off: a.aOff,
      scale: 1 / Math.sqrt(dk),
      eps: a.eps,
    },
    grid: [g.count, nv, 1],
  });
}
