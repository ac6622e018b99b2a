/**
 * The paged KV cache: one pool of fixed-size pages per layer, allocated once; a sequence owns a row of the
 * page table (slot → page ids) and attention reads through it. Batching, prefix sharing and rollback
 * (truncate a length) never copy KV. Pages are reference-counted: a page of a cached prefix
 * (prefix_cache.ts) is held by the cache and by every sequence whose table points at it. Sliding-window
 * layers (`shape.ring`) keep a fixed ring of pages per slot instead (kv_ring.ts), outside the pool.
 * @module
 */
import { CapacityError, ShapeError } from "../errors.ts";
import type { Gpu } from "../gpu/device.ts";
import { kv8Block } from "../ops/kv8.ts";
import { KvRing } from "./kv_ring.ts";

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
  /** Sliding-window layers (indexes among `layers`) keeping `pages` ring pages per slot (kv_ring.ts). */
  ring?: { layers: number[]; pages: number };
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
  /**
   * Per layer: (pages, 2, nkv, ps, hd) act — K then V inside each page — or the same layout in q8 codes; a
   * ring layer's buffer is its ring's.
   */
  readonly layers: GPUBuffer[];
  /** Per layer, q8 only: (pages, 2, nkv, ps, hd/QB) f32 scales (src/lab/ref/kv8.ts). */
  readonly scales: GPUBuffer[] | null;
  /** (maxSlots, maxPages) u32. */
  readonly pageTable: GPUBuffer;
  /** Sliding-window layers' rings (null: every layer keeps pool pages). */
  readonly ring: KvRing | null;
  /** Bytes of one pool page across the layers that keep pool pages (K, V and q8 scales). */
  readonly bytesPerPage: number;
  /** Per layer: bytes of one page in `layers[l]`, and in `scales[l]` (0 without q8). */
  readonly pageValueBytes: number;
  readonly pageScaleBytes: number;
  #free: number[];
  #table: Uint32Array;
  /** Holders of each page: sequences whose table row points at it, and the prefix cache. */
  #refs: Uint16Array;
  /**
   * Frees up to `n` pages held only by the prefix cache and returns how many it freed; `reclaimable` says how
   * many it could. Set by the cache; without one, nothing is reclaimable.
   */
  reclaimer: { reclaimable(): number; reclaim(n: number): number } | null = null;

  constructor(readonly gpu: Gpu, readonly shape: KvShape) {
    const type = shape.type ?? "act";
    this.pageValueBytes = kvValueBytesPerToken(shape.nkv, shape.hd, type, gpu.info.f16) * shape.pageSize;
    this.pageScaleBytes = type === "q8" ? (this.pageValueBytes / kv8Block(shape.hd)) * 4 : 0;
    const ringLayers = shape.ring?.layers ?? [];
    this.bytesPerPage = (shape.layers - ringLayers.length) * (this.pageValueBytes + this.pageScaleBytes);
    const R = shape.ring?.pages ?? 0;
    const layerBytes = this.pageValueBytes * Math.max(shape.numPages, R * shape.maxSlots);
    if (layerBytes > gpu.info.maxBinding) {
      throw new CapacityError(
        `KV pool of ${shape.numPages} pages needs ${layerBytes} bytes per layer, ` +
          `over the ${gpu.info.maxBinding}-byte binding limit`,
      );
    }
    this.ring = shape.ring
      ? new KvRing(gpu, {
        layers: ringLayers.length,
        pages: R,
        slots: shape.maxSlots,
        maxPages: shape.maxPages,
        pageValueBytes: this.pageValueBytes,
        pageScaleBytes: this.pageScaleBytes,
      })
      : null;
    // Copies in and out: the prefix cache's second tier (prefix_store.ts).
    const usage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST;
    const make = (l: number, label: string, pageBytes: number, ring: GPUBuffer[] | undefined) => {
      const r = ringLayers.indexOf(l);
      return r >= 0 ? ring![r] : gpu.memory.create("kv", { label, size: pageBytes * shape.numPages, usage });
    };
    this.layers = Array.from(
      { length: shape.layers },
      (_, l) => make(l, `kv.${l}`, this.pageValueBytes, this.ring?.values),
    );
    this.scales = type === "q8"
      ? Array.from(
        { length: shape.layers },
        (_, l) => make(l, `kv_scale.${l}`, this.pageScaleBytes, this.ring?.scales ?? undefined),
      )
      : null;
    this.pageTable = gpu.memory.create("kv", {
      label: "page_table",
      size: shape.maxSlots * shape.maxPages * 4,
      usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST,
    });
    this.#table = new Uint32Array(shape.maxSlots * shape.maxPages);
    this.#refs = new Uint16Array(shape.numPages);
    // Highest ids first so pop() hands out low ids: deterministic layouts make runs repeatable.
    this.#free = Array.from({ length: shape.numPages }, (_, i) => shape.numPages - 1 - i);
  }

  /** The page table layer `l`'s attention reads through: the ring's for a ring layer. */
  tableOf(l: number): GPUBuffer {
    return this.ring && this.shape.ring!.layers.includes(l) ? this.ring.table : this.pageTable;
  }

  /**
   * Throws unless a `rows`-row prefill segment of layer `l` whose rows read `window` keys back fits the
   * layer's ring (the segment writes all its keys before reading); pool layers always fit.
   */
  checkSegment(l: number, window: number | undefined, rows: number): void {
    if (this.tableOf(l) === this.pageTable) return;
    if ((window ?? Infinity) + rows - 1 > this.shape.ring!.pages * this.shape.pageSize) {
      throw new ShapeError(`a ${rows}-row segment overruns KV layer ${l}'s ring`);
    }
  }

  get freePages(): number {
    return this.#free.length;
  }
  get usedPages(): number {
    return this.shape.numPages - this.#free.length;
  }
  /** Free pages plus those the prefix cache would give up: what a new request can count on. */
  get availablePages(): number {
    return this.#free.length + (this.reclaimer?.reclaimable() ?? 0);
  }
  /** How many holders `page` has (0: free). */
  refs(page: number): number {
    return this.#refs[page];
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
    const first = pages.length;
    for (const p of this.alloc(need - first)) pages.push(p);
    this.#upload(slot, pages, first);
  }

  /**
   * Appends `shared` pages (a cached prefix, never written again) to a sequence's row, which holds only
   * shared pages so far, and takes a reference on each.
   */
  share(slot: number, pages: number[], shared: number[]): void {
    const first = pages.length;
    for (const p of shared) {
      this.#refs[p]++;
      pages.push(p);
    }
    if (shared.length) this.#upload(slot, pages, first);
  }

  /**
   * Takes `n` pages outside any sequence (one reference each, the caller's), reclaiming cached ones if
   * needed; throws CapacityError when the pool cannot spare them.
   */
  alloc(n: number): number[] {
    const short = n - this.#free.length;
    if (short > 0 && (this.reclaimer?.reclaim(short) ?? 0) < short) {
      throw new CapacityError(`KV cache full: need ${n} more pages, ${this.#free.length} free`);
    }
    return Array.from({ length: n }, () => {
      const p = this.#free.pop()!;
      this.#refs[p] = 1;
      return p;
    });
  }

  /** Takes one more reference on `page` (the prefix cache keeping a sequence's page). */
  retain(page: number): void {
    if (!this.#refs[page]) throw new Error(`page ${page} is free`);
    this.#refs[page]++;
  }

  #upload(slot: number, pages: number[], first: number): void {
    const row = slot * this.shape.maxPages;
    for (let i = first; i < pages.length; i++) this.#table[row + i] = pages[i];
    this.gpu.device.queue.writeBuffer(
      this.pageTable,
      (row + first) * 4,
      this.#table,
      row + first,
      pages.length - first,
    );
  }

  /**
   * Drops one reference on each page; a page nobody holds returns to the pool. Safe right away: later GPU
   * work is queued after work already submitted.
   */
  release(pages: number[]): void {
    for (let i = pages.length - 1; i >= 0; i--) {
      const p = pages[i];
      if (!this.#refs[p]) throw new Error(`page ${p} released twice`);
      if (--this.#refs[p] === 0) this.#free.push(p);
    }
    pages.length = 0;
  }

  destroy(): void {
    const ring = new Set([...(this.ring?.values ?? []), ...(this.ring?.scales ?? [])]);
    for (const b of [...this.layers, ...(this.scales ?? [])]) if (!ring.has(b)) this.gpu.memory.destroy(b);
    this.ring?.destroy();
    this.gpu.memory.destroy(this.pageTable);
  }
}
