/**
 * Per-sequence state of the recurrent layers (gated DeltaNet, short conv): a fixed size per slot whatever the
 * context length, allocated once for every slot like the KV pool. A sequence's state is taken as zero when
 * its first row has position 0 (src/ops/recurrent.ts), so a slot needs no clearing when it is reused, and a
 * cancelled sequence frees nothing but its slot.
 * @module
 */
import { LoaderError } from "../errors.ts";
import type { Gpu } from "../gpu/device.ts";
import { type ArchConfig, keepsKv, layerSpec } from "../models/model.ts";

/** One recurrent layer's buffers: conv inputs (slots, KC−1, C) f32, DeltaNet state (slots, nv, dk, dv) f32. */
export interface LayerState {
  conv: GPUBuffer;
  delta: GPUBuffer | null;
  /** Bytes of one slot in `conv` and in `delta`. */
  convBytes: number;
  deltaBytes: number;
}

/** Conv channels and delta-state floats per slot of a recurrent layer kind. */
function shapesOf(c: ArchConfig, mixer: string): { convC: number; convK: number; delta: number } {
  const h = c.hybrid;
  if (mixer === "gated_deltanet" && h?.deltanet) {
    const d = h.deltanet;
    return { convC: 2 * d.nk * d.dk + d.nv * d.dv, convK: d.convKernel, delta: d.nv * d.dk * d.dv };
  }
  if (mixer === "short_conv" && h?.shortConv) {
    return { convC: c.dims.hidden, convK: h.shortConv.convKernel, delta: 0 };
  }
  throw new LoaderError(`${c.modelType}/config.json`, "layer_types", `no shapes for ${mixer} layers`);
}

export class RecurrentState {
  /** Per model layer: its state, or null for layers that keep KV pages. */
  readonly layers: (LayerState | null)[];
  /** Bytes of state one sequence slot holds across all layers. */
  readonly bytesPerSlot: number;

  constructor(readonly gpu: Gpu, readonly config: ArchConfig, readonly slots: number, label = "state") {
    let perSlot = 0;
    const usage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST;
    const mk = (label: string, bytes: number) =>
      gpu.memory.create("kv", { label, size: Math.max(16, Math.ceil(bytes / 16) * 16), usage });
    this.layers = Array.from({ length: config.dims.layers }, (_, i) => {
      const spec = layerSpec(config, i);
      if (keepsKv(spec)) return null;
      const s = shapesOf(config, spec.mixer);
      const convBytes = (s.convK - 1) * s.convC * 4;
      perSlot += convBytes + s.delta * 4;
      return {
        conv: mk(`conv_${label}.${i}`, slots * convBytes),
        delta: s.delta ? mk(`delta_${label}.${i}`, slots * s.delta * 4) : null,
        convBytes,
        deltaBytes: s.delta * 4,
      };
    });
    this.bytesPerSlot = perSlot;
  }

  /** Whether any layer keeps recurrent state. */
  get any(): boolean {
    return this.layers.some((l) => l !== null);
  }

  /**
   * Copies slot `from`'s state of every layer to slot `to` of `into` (another RecurrentState shaped like
   * this one, e.g. the prefix cache's snapshots), in command order.
   */
  encodeCopy(enc: GPUCommandEncoder, from: number, into: RecurrentState, to: number): void {
    for (const [i, l] of this.layers.entries()) {
      const d = into.layers[i];
      if (!l || !d) continue;
      enc.copyBufferToBuffer(l.conv, from * l.convBytes, d.conv, to * l.convBytes, l.convBytes);
      if (l.delta && d.delta) {
        enc.copyBufferToBuffer(l.delta, from * l.deltaBytes, d.delta, to * l.deltaBytes, l.deltaBytes);
      }
    }
  }

  destroy(): void {
    for (const l of this.layers) {
      if (!l) continue;
      this.gpu.memory.destroy(l.conv);
      if (l.delta) this.gpu.memory.destroy(l.delta);
    }
  }
}

/** Model layer index → index among the layers that keep KV pages (−1 for the others). */
export function kvLayerIndex(config: ArchConfig): number[] {
  let n = 0;
  return Array.from({ length: config.dims.layers }, (_, i) => keepsKv(layerSpec(config, i)) ? n++ : -1);
}

/** Layers that keep KV pages (the KV pool's layers). */
export function kvLayerCount(config: ArchConfig): number {
  return Array.from({ length: config.dims.layers }, (_, i) => layerSpec(config, i)).filter(keepsKv).length;
}
