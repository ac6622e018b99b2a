/**
 * The dimensions every step needs and the activation buffers, allocated once for the largest step
 * (no allocation per token). Shapes are in the comments; "act" is f16 where the adapter has shader-f16.
 * @module
 */
import type { Gpu } from "../gpu/device.ts";
import type { HybridDims } from "../models/model.ts";
import type { Linear } from "../ops/linear.ts";
import { splitKRows } from "../ops/matmul.ts";
import { type MatrixScratch, matrixScratchBytes, usesMatrixUnits } from "../ops/matmul_matrix.ts";
import { allocMoeGroups, type MoeGroups } from "../ops/moe.ts";
import { deltaChunkLen, deltaScratchBytes } from "../ops/recurrent.ts";

export interface Dims {
  hidden: number;
  layers: number;
  nq: number;
  nkv: number;
  hd: number;
  /** RoPE-rotated dims per head. */
  rotary: number;
  intermediate: number;
  vocab: number;
  eps: number;
}

export interface Capacity {
  /** Rows in the largest step (prefill chunk + decode rows). */
  rows: number;
  /** Decode rows in one step (max batch). */
  decodeRows: number;
  /** Rows that may get logits in one step. */
  logitRows: number;
  /** Context window (tokens). */
  context: number;
}

export interface Activations {
  rows: GPUBuffer; // (rows) Row {token, pos, slot, kind}
  x: GPUBuffer; // (rows, hidden) f32 residual
  xn: GPUBuffer; // (rows, hidden) f32: matmul inputs are f32 (no f16→f32 conversion in the matmuls)
  qkv: GPUBuffer; // (rows, (nq + 2·nkv)·hd) act
  q: GPUBuffer; // (rows, nq·hd) act
  attn: GPUBuffer; // (rows, nq·hd) f32
  gu: GPUBuffer; // (rows, 2·intermediate) act
  h: GPUBuffer; // (rows, intermediate) f32
  opart: GPUBuffer; // (decodeRows, nq, maxSplit, hd) f32
  ml: GPUBuffer; // (decodeRows, nq, maxSplit) vec2<f32>
  xl: GPUBuffer; // (logitRows, hidden) f32
  logits: GPUBuffer; // (logitRows, vocab) f32
  splitk: GPUBuffer; // (splits, rows, hidden) f32: split-K partials of the narrow prefill matmuls (o, down)
  matrix?: MatrixScratch; // f16 x (rows, max K), weight rows, f32 tiles: prefill matmuls on matrix units
  maxSplit: number;
  cap: Capacity;
  /** Buffers of the non-dense layers a model declares (absent for dense models). */
  hybrid: HybridActivations;
}

/** Activations of gated attention, recurrent mixers and MoE MLPs (allocActivations makes what `h` needs). */
export interface HybridActivations {
  gate?: GPUBuffer; // (rows, nq·hd) act: the attention output gate's logits
  mix?: GPUBuffer; // (rows, mixWidth) f32: a recurrent layer's input projection
  mixWidth?: number;
  conv?: GPUBuffer; // (rows, conv channels) f32: the causal conv's output
  delta?: GPUBuffer; // (rows, nv·dv) f32: the gated DeltaNet's normed, gated output
  // The chunked delta rule's scratch for a prefill segment of ≤ rows (src/ops/recurrent.ts): per chunk of C
  // positions, [W | U] (nv, C, dk + dv) f32, gates (nv, C) vec4<f32>, starting state (nv, dk, dv) f32.
  deltaScratch?: GPUBuffer;
  moe?: {
    router: GPUBuffer; // (rows, E) f32
    ids: GPUBuffer; // (rows, k) u32
    weights: GPUBuffer; // (rows, k) f32
    h: GPUBuffer; // (rows·k, I) f32
    y: GPUBuffer; // (rows·k, hidden) f32
    shared: GPUBuffer; // (rows, hidden) f32: the shared expert's output
    sharedGate: GPUBuffer; // (rows) f32: its gate logit
    groups: MoeGroups;
  };
}

/** Width of a recurrent layer's input projection: [q | k | v | z | b | a] (DeltaNet) or [B | C | x]. */
export function mixWidth(d: Dims, h: HybridDims): number {
  const dn = h.deltanet;
  const deltaWidth = dn ? 2 * dn.nk * dn.dk + 2 * dn.nv * dn.dv + 2 * dn.nv : 0;
  return Math.max(deltaWidth, h.shortConv ? 3 * d.hidden : 0);
}

/** Bytes per row of the widest hybrid activation (the storage-binding fit of a prefill chunk). */
function hybridRowBytes(d: Dims, h: HybridDims | undefined, gpu: Pick<Gpu, "info">): number {
  if (!h) return 0;
  const m = h.moe;
  const dn = h.deltanet;
  // The delta scratch's largest region per row: [W | U], or the chunks' starting states (C ≥ 16).
  const C = dn ? deltaChunkLen(gpu.info, dn.dk, dn.dv) : 1;
  return Math.max(
    mixWidth(d, h) * 4,
    m ? m.topK * Math.max(m.intermediate, d.hidden) * 4 : 0,
    dn ? (2 * dn.nk * dn.dk + dn.nv * dn.dv) * 4 : 0,
    dn ? dn.nv * Math.max(dn.dk + dn.dv, Math.ceil(dn.dk * dn.dv / C)) * 4 : 0,
  );
}

export function allocActivations(
  gpu: Gpu,
  d: Dims,
  cap: Capacity,
  hd?: HybridDims,
  weights?: unknown,
): Activations {
  const ab = gpu.info.f16 ? 2 : 4;
  const mk = (label: string, bytes: number, extra = 0) =>
    gpu.memory.create("activations", {
      label,
      size: Math.max(16, Math.ceil(bytes / 16) * 16),
      usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC | extra,
    });
  const R = cap.rows;
  const mx = matrixScratchBytes(gpu, R, prefillLinears(d, weights));
  const maxSplit = Math.ceil(cap.context / gpu.profile.decodeAttention.keysPerSplit);
  return {
    rows: mk("rows", R * 16),
    x: mk("x", R * d.hidden * 4),
    xn: mk("xn", R * d.hidden * 4),
    qkv: mk("qkv", R * (d.nq + 2 * d.nkv) * d.hd * ab),
    q: mk("q", R * d.nq * d.hd * ab),
    attn: mk("attn", R * d.nq * d.hd * 4),
    gu: mk("gu", R * 2 * d.intermediate * ab),
    h: mk("h", R * d.intermediate * 4),
    opart: mk("opart", cap.decodeRows * d.nq * maxSplit * d.hd * 4),
    ml: mk("ml", cap.decodeRows * d.nq * maxSplit * 8),
    xl: mk("xl", cap.logitRows * d.hidden * 4),
    logits: mk("logits", cap.logitRows * d.vocab * 4),
    splitk: mk("splitk", splitKRows(gpu.profile, cap.rows) * d.hidden * 4),
    ...(mx ? { matrix: { x: mk("matrix_x", mx.x), w: mk("matrix_w", mx.w), y: mk("matrix_y", mx.y) } } : {}),
    maxSplit,
    cap,
    hybrid: hd ? allocHybrid(gpu, d, R, hd, mk) : {},
  };
}

/** Every dense Linear in a model's weight tree (expert stacks, which carry E, are not). */
export function linearsIn(tree: unknown, out: Linear[] = [], seen = new Set<object>()): Linear[] {
  if (typeof tree !== "object" || tree === null || seen.has(tree) || ArrayBuffer.isView(tree)) return out;
  seen.add(tree);
  const o = tree as Record<string, unknown>;
  if (Array.isArray(o.shards) && typeof o.K === "number" && "format" in o && !("E" in o)) {
    out.push(o as unknown as Linear);
    return out;
  }
  for (const v of Object.values(o)) linearsIn(v, out, seen);
  return out;
}

function allocHybrid(
  gpu: Gpu,
  d: Dims,
  R: number,
  h: HybridDims,
  mk: (label: string, bytes: number) => GPUBuffer,
): HybridActivations {
  const ab = gpu.info.f16 ? 2 : 4;
  const out: HybridActivations = {};
  if (h.gatedAttention) out.gate = mk("attn_gate", R * d.nq * d.hd * ab);
  const width = mixWidth(d, h);
  if (width) {
    out.mix = mk("mix", R * width * 4);
    out.mixWidth = width;
  }
  const dn = h.deltanet;
  const convC = Math.max(dn ? 2 * dn.nk * dn.dk + dn.nv * dn.dv : 0, h.shortConv ? d.hidden : 0);
  if (convC) out.conv = mk("conv", R * convC * 4);
  if (dn) {
    out.delta = mk("delta", R * dn.nv * dn.dv * 4);
    if (gpu.profile.deltaNet.chunked) {
      out.deltaScratch = mk("delta_scratch", deltaScratchBytes(dn, deltaChunkLen(gpu.info, dn.dk, dn.dv), R));
    }
  }
  const m = h.moe;
  if (m) {
    out.moe = {
      router: mk("router", R * m.experts * 4),
      ids: mk("expert_ids", R * m.topK * 4),
      weights: mk("expert_weights", R * m.topK * 4),
      h: mk("expert_h", R * m.topK * m.intermediate * 4),
      y: mk("expert_y", R * m.topK * d.hidden * 4),
      shared: mk("shared_expert", R * d.hidden * 4),
      sharedGate: mk("shared_gate", R * 4),
      groups: allocMoeGroups(gpu, R * m.topK, m.experts),
    };
  }
  return out;
}

/** Rows of a prefill step running alone at most, off matrix units (bigger matmuls fill the GPU better). */
const SOLO_ROWS = 2048;

/**
 * The most rows a prefill step running alone takes: the profile's `matrixSoloRows` where the model's prefill
 * matmuls run on matrix units, else SOLO_ROWS.
 */
export function soloRowsCap(gpu: Pick<Gpu, "info" | "profile">, d: Dims, weights: unknown): number {
  const onMatrixUnits = prefillLinears(d, weights).some((l) => usesMatrixUnits(gpu, l));
  return onMatrixUnits ? gpu.profile.matmul.tiled.matrixSoloRows : SOLO_ROWS;
}

/**
 * The Linears prefill rows multiply: not the embedding table or the LM head (N = vocab), gathered or run on
 * decode's kernels.
 */
function prefillLinears(d: Dims, weights: unknown): Linear[] {
  return weights ? linearsIn(weights).filter((l) => l.N !== d.vocab) : [];
}

/**
 * Rows of a solo prefill step (at most `maxRows`, a multiple of 64) whose activations each fit one storage
 * binding, next to `maxBatch` decode rows: the widest per-row buffer decides (gate|up, h, or split-K's
 * parts).
 */
export function soloRowsFit(
  d: Dims,
  maxBatch: number,
  gpu: Pick<Gpu, "info" | "profile">,
  hybrid?: HybridDims,
  maxRows = SOLO_ROWS,
): number {
  const ab = gpu.info.f16 ? 2 : 4;
  const perRow = Math.max(
    d.hidden * 4,
    (d.nq + 2 * d.nkv) * d.hd * ab,
    d.nq * d.hd * 4,
    2 * d.intermediate * ab,
    d.intermediate * 4,
    (splitKRows(gpu.profile, maxRows) / maxRows) * d.hidden * 4,
    hybridRowBytes(d, hybrid, gpu),
  );
  // The delta scratch holds two chunks (≤ 2·64 rows) more than its rows: a segment may start mid-chunk.
  const fit = Math.floor(gpu.info.maxBinding / perRow) - maxBatch - (hybrid?.deltanet ? 128 : 0);
  return Math.max(64, Math.min(maxRows, fit - (fit % 64)));
}
