/**
 * The prefix cache's page file: a safetensors file holding a run of consecutive pages of one prefix.
 * `tokens` (every token from the prompt's start through its last page, to check a match exactly),
 * `kv.{layer}` (pages, 2, nkv, pageSize, hd) as the pool stores them, `kv_scale.{layer}` (pages, ·) with
 * q8, and metadata: the format, the model fingerprint, the first page, the chain hash of its parent and of
 * every page, and a checksum of the tensors (in that order, then `state`).
 * Format 2 adds, for models with per-sequence state (recurrent layers, sliding-window KV rings), `state`
 * (U8): the prefix cache's snapshot of that state after the file's last page (prefix_state.ts), per
 * recurrent layer its conv state (KC−1, C) f32 then its DeltaNet state (nv, dk, dv) f32, then per ring layer
 * the window's pages before the boundary as the ring stores them, then per ring layer their q8 scales.
 * Such a model resumes only at a page whose file holds it; a run without one is a path to deeper files.
 * Format 1 files (no state) read as format 2.
 * @module
 */
import { encodeSafetensors, type TensorIndex } from "../loader/safetensors.ts";
import type { KvPool } from "./kv_pool.ts";
import { ROOT_CHAIN } from "./prefix_cache.ts";

export const PREFIX_FILE_FORMAT = "flint-prefix-2";

/** Whether a file's `format` is one this version reads. */
export function readsPageFormat(format: string | undefined): boolean {
  return format === PREFIX_FILE_FORMAT || format === "flint-prefix-1";
}

/**
 * Checksum of the tensors' bytes: four lanes over little-endian 32-bit words, each step a bijection of the
 * lane (add or xor, rotate), so any one changed word changes the result; about twice the speed of
 * multiply-based mixing, so loading pages stays well ahead of prefilling them (not a defence against
 * crafted files: the folder is the user's own).
 */
export function pageChecksum(parts: Uint8Array[]): string {
  let a = 0x811c9dc5 | 0, b = 0x01000193 | 0, c = 0x9e3779b9 | 0, d = 0x85ebca6b | 0;
  for (const p of parts) {
    const n = p.byteLength >> 2;
    const w = p.byteOffset % 4 === 0
      ? new Uint32Array(p.buffer, p.byteOffset, n)
      : new Uint32Array(p.slice(0, n * 4).buffer);
    let i = 0;
    for (; i + 4 <= n; i += 4) {
      a = (a + w[i]) | 0;
      a = (a << 5) | (a >>> 27);
      b = ((b ^ w[i + 1]) + 0x7f4a7c15) | 0;
      c = (c + w[i + 2]) | 0;
      c = (c << 11) | (c >>> 21);
      d = ((d ^ w[i + 3]) + 0x632be5ab) | 0;
    }
    for (; i < n; i++) a = (((a + w[i]) | 0) << 5) | (((a + w[i]) | 0) >>> 27);
    for (let j = n * 4; j < p.byteLength; j++) b = ((b ^ p[j]) + 0x7f4a7c15) | 0;
    c = (c + p.byteLength) | 0;
  }
  return [a, b, c, d].map((x) => (x >>> 0).toString(16).padStart(8, "0")).join("");
}

export interface PageRun {
  fingerprint: string;
  /** Index of the first page in the prefix. */
  start: number;
  /** Chain hash of the page before the first (ROOT_CHAIN at the start), and of each page. */
  parent: string;
  chains: string[];
  /** Tokens 0 .. (start + pages)·pageSize. */
  tokens: Uint32Array;
  /** Per layer the pages' values, then per layer their q8 scales, as spill() read them back. */
  data: Uint8Array;
  /** The state snapshot after the last page (stateful models; prefix_state.ts). */
  state?: Uint8Array;
}

/** The file's parts (header, then tensor bytes). */
export function encodePageFile(kv: KvPool, run: PageRun): Uint8Array[] {
  const L = kv.shape.layers;
  const { nkv, pageSize: ps } = kv.shape;
  const n = run.chains.length;
  const valueBytes = n * kv.pageValueBytes;
  const scaleBytes = n * kv.pageScaleBytes;
  const [dtype, width] = kv.scales
    ? ["U8", 1] as const
    : kv.gpu.info.f16
    ? ["F16", 2] as const
    : ["F32", 4] as const;
  type Tensor = { name: string; dtype: "U32" | "U8" | "F16" | "F32"; shape: number[]; data: Uint8Array };
  const tokens = new Uint8Array(run.tokens.buffer, run.tokens.byteOffset, run.tokens.byteLength);
  const tensors: Tensor[] = [{ name: "tokens", dtype: "U32", shape: [run.tokens.length], data: tokens }];
  for (let l = 0; l < L; l++) {
    tensors.push({
      name: `kv.${l}`,
      dtype,
      shape: [n, 2, nkv, ps, kv.pageValueBytes / (2 * nkv * ps * width)],
      data: run.data.subarray(l * valueBytes, (l + 1) * valueBytes),
    });
  }
  for (let l = 0; kv.scales && l < L; l++) {
    const off = L * valueBytes + l * scaleBytes;
    tensors.push({
      name: `kv_scale.${l}`,
      dtype: "F32",
      shape: [n, kv.pageScaleBytes / 4],
      data: run.data.subarray(off, off + scaleBytes),
    });
  }
  if (run.state) tensors.push({ name: "state", dtype: "U8", shape: [run.state.byteLength], data: run.state });
  return encodeSafetensors(tensors, {
    format: PREFIX_FILE_FORMAT,
    fingerprint: run.fingerprint,
    start: String(run.start),
    parent: run.parent,
    chains: run.chains.join(","),
    checksum: pageChecksum(tensors.map((t) => t.data)),
  });
}

/**
 * The run a file's header describes, and whether it holds a state snapshot of `stateBytes` (0: the model
 * keeps none); throws when it is not a page file of this pool and fingerprint.
 */
export function checkPageFile(
  h: TensorIndex,
  kv: KvPool,
  fingerprint: string,
  stateBytes = 0,
): { start: number; chains: string[]; parent: string; state: boolean } {
  const m = h.metadata;
  if (!readsPageFormat(m.format)) throw new Error(`format ${m.format}, expected ${PREFIX_FILE_FORMAT}`);
  if (m.fingerprint !== fingerprint) throw new Error("written for another model or KV format");
  const chains = (m.chains ?? "").split(",").filter(Boolean);
  const start = Number(m.start);
  const tokens = h.tensors.get("tokens");
  const ps = kv.shape.pageSize;
  if (!chains.length || !Number.isInteger(start) || tokens?.shape[0] !== (start + chains.length) * ps) {
    throw new Error("metadata does not match its tensors");
  }
  for (let l = 0; l < kv.shape.layers; l++) {
    if (h.tensors.get(`kv.${l}`)?.byteLength !== chains.length * kv.pageValueBytes) {
      throw new Error(`kv.${l} has the wrong size`);
    }
  }
  const state = h.tensors.get("state");
  if (state && state.byteLength !== stateBytes) throw new Error("state has the wrong size");
  return { start, chains, parent: m.parent ?? ROOT_CHAIN, state: !!state };
}
