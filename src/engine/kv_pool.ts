/**
 * The paged KV cache: one pool of fixed-size pages per layer, allocated once; a sequence owns a row of the
 * page table (slot → page ids) and attention reads through it. Batching, prefix sharing and rollback
 * (truncate a length) never copy KV.
 * @module
 */
import { CapacityError } from "../errors.ts";
import type { Gpu } from "../gpu/device.ts";
import { kv8Block } from "../ops/kv8.ts";

/** KV cache element type: the activation dtype (f16, or f32 without shader-f16), or 8-bit codes + scales. */
export type KvCacheType = "act" | "q8";

export interface KvShape {
  layers: number;
  nkv: number;
  hd: number;
  pageSize: number;
  numPages: number;
  maxSlots: number;
  /** Page-table row length: enough pages for one context window. */
  maxPages: number;
  /** Default "act". */
  type?: KvCacheType;
}

/**
 * Bytes of K and V of one token in one layer's values buffer (q8: the codes; the binding that can hit the
 * limit).
 */
export function kvValueBytesPerToken(nkv: number, hd: number, type: KvCacheType, f16: boolean): number {
  return 2 * nkv * hd * (type === "q8" ? 1 : f16 ? 2 : 4);
}

/** Bytes of K and V of one token in one layer (q8: codes and scales). */
export function kvBytesPerToken(nkv: number, hd: number, type: KvCacheType, f16: boolean): number {
  const values = kvValueBytesPerToken(nkv, hd, type, f16);
  return type === "q8" ? values + (values / kv8Block(hd)) * 4 : values;
}

export class KvPool {
  /** Per layer: (pages, 2, nkv, ps, hd) act — K then V inside each page — or the same layout in q8 codes. */
  readonly layers: GPUBuffer[];
  /** Per layer, q8 only: (pages, 2, nkv, ps, hd/QB) f32 scales (src/lab/ref/kv8.ts). */
  readonly scales: GPUBuffer[] | null;
  /** (maxSlots, maxPages) u32. */
  readonly pageTable: GPUBuffer;
  readonly bytesPerPage: number;
  #free: number[];
  #table: Uint32Array;

  constructor(readonly gpu: Gpu, readonly shape: KvShape) {
    const type = shape.type ?? "act";
    this.bytesPerPage = kvBytesPerToken(shape.nkv, shape.hd, type, gpu.info.f16) * shape.pageSize;
    const layerBytes = kvValueBytesPerToken(shape.nkv, shape.hd, type, gpu.info.f16) * shape.pageSize *
      shape.numPages;
    if (layerBytes > gpu.info.maxBinding) {
      throw new CapacityError(
        `KV pool of ${shape.numPages} pages needs ${layerBytes} bytes per layer, ` +
          `over the ${gpu.info.maxBinding}-byte binding limit`,
      );
    }
    this.layers = Array.from(
      { length: shape.layers },
      (_, l) =>
        gpu.memory.create("kv", { label: `kv.${l}`, size: layerBytes, usage: GPUBufferUsage.STORAGE }),
    );
    this.scales = type === "q8"
      ? Array.from({ length: shape.layers }, (_, l) =>
        gpu.memory.create("kv", {
          label: `kv_scale.${l}`,
          size: (layerBytes / kv8Block(shape.hd)) * 4,
          usage: GPUBufferUsage.STORAGE,
        }))
      : null;
    this.pageTable = gpu.memory.create("kv", {
      label: "page_table",
      size: shape.maxSlots * shape.maxPages * 4,
      usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST,
    });
    this.#table = new Uint32Array(shape.maxSlots * shape.maxPages);
    // Highest ids first so pop() hands out low ids: deterministic layouts make runs repeatable.
    this.#free = Array.from({ length: shape.numPages }, (_, i) => shape.numPages - 1 - i);
  }

  get freePages(): number {
    return this.#free.length;
  }
  get usedPages(): number {
    return this.shape.numPages - this.#free.length;
  }

  /** Pages needed to hold positions 0 .. n−1. */
  pagesFor(n: number): number {
    return Math.ceil(n / this.shape.pageSize);
  }

  /**
   * Grows `pages` (a slot's list) so positions 0 .. upto are covered, and uploads the new page-table
   * entries. Throws CapacityError when the pool is exhausted (nothing is changed then).
   */
  ensure(slot: number, pages: number[], upto: number): void {
    const need = this.pagesFor(upto + 1);
    if (need > this.shape.maxPages) throw new CapacityError(`position ${upto} is beyond the context window`);
    if (need <= pages.length) return;
    if (need - pages.length > this.#free.length) {
      throw new CapacityError(
        `KV cache full: need ${need - pages.length} more pages, ${this.#free.length} free`,
      );
    }
    const first = pages.length;
    while (pages.length < need) pages.push(this.#free.pop()!);
    const row = slot * this.shape.maxPages;
    for (let i = first; i < need; i++) this.#table[row + i] = pages[i];
    this.gpu.device.queue.writeBuffer(
      this.pageTable,
      (row + first) * 4,
      this.#table,
      row + first,
      need - first,
    );
  }

  /** Returns pages to the pool. Safe right away: later GPU work is queued after work already submitted. */
  release(pages: number[]): void {
    for (let i = pages.length - 1; i >= 0; i--) this.#free.push(pages[i]);
    pages.length = 0;
  }

  destroy(): void {
    for (const b of [...this.layers, ...(this.scales ?? [])]) this.gpu.memory.destroy(b);
    this.gpu.memory.destroy(this.pageTable);
  }
}
