/**
 * The dimensions every step needs and the activation buffers, allocated once for the largest step
 * (no allocation per token). Shapes are in the comments; "act" is f16 where the adapter has shader-f16.
 * @module
 */
import type { Gpu } from "../gpu/device.ts";
import { splitKRows } from "../ops/matmul.ts";

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
  maxSplit: number;
  cap: Capacity;
}

export function allocActivations(gpu: Gpu, d: Dims, cap: Capacity): Activations {
  const ab = gpu.info.f16 ? 2 : 4;
  const mk = (label: string, bytes: number, extra = 0) =>
    gpu.memory.create("activations", {
      label,
      size: Math.max(16, Math.ceil(bytes / 16) * 16),
      usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC | extra,
    });
  const R = cap.rows;
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
    maxSplit,
    cap,
  };
}

/**
 * Rows of a solo prefill step (at most 2048, a multiple of 64) whose activations each fit one storage
 * binding, next to `maxBatch` decode rows: the widest per-row buffer decides (gate|up, h, or split-K's
 * parts).
 */
export function soloRowsFit(d: Dims, maxBatch: number, gpu: Pick<Gpu, "info" | "profile">): number {
  const ab = gpu.info.f16 ? 2 : 4;
  const perRow = Math.max(
    d.hidden * 4,
    (d.nq + 2 * d.nkv) * d.hd * ab,
    d.nq * d.hd * 4,
    2 * d.intermediate * ab,
    d.intermediate * 4,
    (splitKRows(gpu.profile, 2048) / 2048) * d.hidden * 4,
  );
  const fit = Math.floor(gpu.info.maxBinding / perRow) - maxBatch;
  return Math.max(64, Math.min(2048, fit - (fit % 64)));
}
