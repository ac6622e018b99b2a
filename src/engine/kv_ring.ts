/**
 * Sliding-window attention layers' KV: a ring of R pages per slot instead of pool pages for the whole
 * context. Logical page i of slot s lives in ring page s·R + (i mod R) of each ring layer's buffer, through a
 * static page table with the pool table's row length, so attention and the KV write (which address keys by
 * logical page, and give keys before the window no weight) run unchanged. R covers the window plus the
 * largest step's rows (a prefill segment writes all its keys before attention reads them): `ringPages`.
 * @module
 */
import type { Gpu } from "../gpu/device.ts";

/**
 * Ring pages per slot for `window`-token windows when a step writes at most `rows` keys of a sequence before
 * its attention reads. Position j lands where j mod (R·pageSize) does, so a key written can only overwrite
 * one at least R·pageSize positions older: none a row of the step still sees if R·pageSize ≥ window + rows
 * − 1. (Keys before a window that the prefill kernels read in a tile are masked to weight exactly 0.)
 */
export function ringPages(window: number, rows: number, pageSize: number): number {
  return Math.ceil((window + rows - 1) / pageSize);
}

export interface RingShape {
  /** Ring layers. */
  layers: number;
  /** Pages per slot (R). */
  pages: number;
  slots: number;
  /** Page-table row length (the pool's maxPages). */
  maxPages: number;
  /** Bytes of one page in a values buffer, and in a q8 scales buffer (0: no scales). */
  pageValueBytes: number;
  pageScaleBytes: number;
}

const USAGE = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST;

/** `n` ≤ R pages from logical page `first` of a ring of R, as runs (ring page, offset among the n, count). */
function runs(first: number, n: number, R: number): { at: number; off: number; len: number }[] {
  const at = first % R;
  const len = Math.min(n, R - at);
  return len < n ? [{ at, off: 0, len }, { at: 0, off: len, len: n - len }] : [{ at, off: 0, len }];
}

export class KvRing {
  /** Per ring layer: (slots·R pages, 2, nkv, ps, hd), as a pool layer's buffer. */
  readonly values: GPUBuffer[];
  /** Per ring layer, q8 only: the pages' scales. */
  readonly scales: GPUBuffer[] | null;
  /** (slots, maxPages) u32: logical page i of slot s → s·R + i mod R. Never changes. */
  readonly table: GPUBuffer;

  constructor(readonly gpu: Gpu, readonly shape: RingShape) {
    const { layers, pages, slots, maxPages, pageValueBytes, pageScaleBytes } = shape;
    const mk = (label: string, size: number) => gpu.memory.create("kv", { label, size, usage: USAGE });
    this.values = Array.from(
      { length: layers },
      (_, l) => mk(`kv_ring.${l}`, slots * pages * pageValueBytes),
    );
    this.scales = pageScaleBytes
      ? Array.from({ length: layers }, (_, l) => mk(`kv_ring_scale.${l}`, slots * pages * pageScaleBytes))
      : null;
    const t = new Uint32Array(slots * maxPages).map((_, k) =>
      Math.floor(k / maxPages) * pages + (k % maxPages) % pages
    );
    this.table = gpu.memory.create("kv", {
      label: "ring_table",
      size: t.byteLength,
      usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST,
    });
    gpu.device.queue.writeBuffer(this.table, 0, t);
  }

  /** Bytes of the ring pages (all slots and layers). */
  get bytes(): number {
    const s = this.shape;
    return s.layers * s.slots * s.pages * (s.pageValueBytes + s.pageScaleBytes);
  }

  destroy(): void {
    for (const b of [...this.values, ...(this.scales ?? []), this.table]) this.gpu.memory.destroy(b);
  }
}

/**
 * The prefix cache's copies of rings at page boundaries: `count` snapshots of the `keep` logical pages
 * before a boundary (what rows after it can see), per ring layer.
 */
export class RingSnapshots {
  readonly values: GPUBuffer[];
  readonly scales: GPUBuffer[] | null;

  constructor(readonly ring: KvRing, readonly count: number, readonly keep: number) {
    const { gpu, shape } = ring;
    const mk = (label: string, size: number) => gpu.memory.create("kv", { label, size, usage: USAGE });
    this.values = ring.values.map((_, l) => mk(`ring_snapshot.${l}`, count * keep * shape.pageValueBytes));
    this.scales = ring.scales
      ? ring.scales.map((_, l) => mk(`ring_snapshot_scale.${l}`, count * keep * shape.pageScaleBytes))
      : null;
  }

  get bytes(): number {
    const s = this.ring.shape;
    return s.layers * this.count * this.keep * (s.pageValueBytes + s.pageScaleBytes);
  }

  /**
   * Encodes the copy of `slot`'s ring pages before logical page `page` (the `keep` of them from page 0 on)
   * into snapshot `id`, or back into the ring (`restore`): logical page i sits at page i mod R of the slot
   * in the ring, at page i − (page − keep) of the snapshot.
   */
  encode(enc: GPUCommandEncoder, slot: number, id: number, page: number, restore = false): void {
    const { pages: R, pageValueBytes: v, pageScaleBytes: sc } = this.ring.shape;
    const skip = Math.max(0, this.keep - page);
    if (skip >= this.keep) return;
    for (const r of runs(page - this.keep + skip, this.keep - skip, R)) {
      const copy = (ring: GPUBuffer, snap: GPUBuffer, b: number) => {
        const at = (slot * R + r.at) * b, s = (id * this.keep + skip + r.off) * b;
        if (restore) enc.copyBufferToBuffer(snap, s, ring, at, r.len * b);
        else enc.copyBufferToBuffer(ring, at, snap, s, r.len * b);
      };
      for (let l = 0; l < this.values.length; l++) {
        copy(this.ring.values[l], this.values[l], v);
        if (this.ring.scales && this.scales) copy(this.ring.scales[l], this.scales[l], sc);
      }
    }
  }

  destroy(): void {
    for (const b of [...this.values, ...(this.scales ?? [])]) this.ring.gpu.memory.destroy(b);
  }
}
