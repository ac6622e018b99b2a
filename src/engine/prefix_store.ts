/**
 * The prefix cache's second tier: cached pages written to safetensors files in a folder of one model
 * fingerprint, so they outlive eviction and restarts. A file holds a run of consecutive pages of one
 * prefix (format: prefix_file.ts).
 * Pages are written while the scheduler is idle (spill), or, when the cache evicts pages not yet written,
 * copied by the next group's commands before their reuse and written after its read-back; they are read
 * when a prompt misses in memory (prefix_load.ts). A file that does not parse, is short, fails its checksum
 * or names another fingerprint is deleted, never used.
 * A model with per-sequence state (prefix_state.ts) ends a run at a page holding a state snapshot and
 * writes the snapshot with it; pages evicted unwritten are written without one.
 * @module
 */
import { readHeader, type TensorIndex } from "../loader/safetensors.ts";
import type { ModelSource } from "../platform/mod.ts";
import type { KvPool } from "./kv_pool.ts";
import type { CacheNode, PrefixCache } from "./prefix_cache.ts";
import { checkPageFile, encodePageFile } from "./prefix_file.ts";
import { loadPages } from "./prefix_load.ts";
import type { PrefixStates } from "./prefix_state.ts";

/** Bytes read back per spill: bounds the staging buffer and the pause a request arriving meanwhile sees. */
const SPILL_BYTES = 128 * 2 ** 20;

/** A folder of page files (the platform's: src/platform/prefix_folder.ts). */
export interface PageFolder {
  /** Where it is, for messages. */
  readonly where: string;
  /** The page files in it. */
  list(): Promise<{ name: string; size: number; mtime: number }[]>;
  /** Reads files of the folder (headers and tensor bytes). */
  readonly source: ModelSource;
  /** Writes a whole file (to a temporary name, then renamed: a crash never leaves half a file). */
  write(name: string, parts: Uint8Array[]): Promise<void>;
  remove(name: string): Promise<void>;
  /** Closes file handles `source` keeps between reads. */
  release?(): void;
  /** Pages are only read from it (a prompt-cache file): nothing is written or deleted. */
  readonly readOnly?: boolean;
}

/** Evicted runs' pages copied by a group's commands, and their read-back once mapped. */
export interface EvictedPages {
  runs: CacheNode[][];
  staging: GPUBuffer;
  read: Promise<Uint8Array> | null;
}

export interface StoredFile {
  name: string;
  bytes: number;
  /** Index of its first page in the prefix, and its pages' chain hashes. */
  start: number;
  chains: string[];
  parent: string;
  /** It holds the state snapshot after its last page (stateful models). */
  state: boolean;
  lastUsed: number;
}

export class PrefixStore {
  #files = new Map<string, StoredFile>();
  /** Chain hash of a page → the file holding it. */
  #byChain = new Map<string, StoredFile>();
  #clock = Date.now();
  #writing: Promise<void> | null = null;
  #spilling: Promise<unknown> = Promise.resolve();
  bytes = 0;
  /** Unwritten runs whose last page is being evicted, for the next group to copy (captureEvicted). */
  #evicted: CacheNode[][] = [];
  #evictedPages = 0;
  /** Evicted pages that could not be kept (more than one group's copy takes at once). */
  dropped = 0;
  /** Called after a file is added or deleted (the server reports the disk figures with it). */
  onFilesChanged: (() => void) | null = null;
  /** Where loading pages spent its time, in ms (bench/experiments/prefix_disk_load.ts). */
  readonly loadTimes = { read: 0, check: 0, upload: 0 };
  /** Most bytes one spill reads back and writes as one file (a prompt-cache file: no limit). */
  runBytes = SPILL_BYTES;

  constructor(
    readonly kv: KvPool,
    readonly cache: PrefixCache,
    readonly folder: PageFolder,
    /** Model weights, quantization, KV type and page size, hashed (prefix_folder.ts). */
    readonly fingerprint: string,
    readonly budgetBytes: number,
    /** The state snapshots of a stateful model, written with the pages they follow. */
    readonly states: PrefixStates | null = null,
  ) {}

  /** Indexes the folder's files; broken ones are deleted with a warning. */
  async open(): Promise<void> {
    for (const f of await this.folder.list()) {
      try {
        const h = await readHeader(this.folder.source, f.name);
        this.#add(this.#check(f.name, h), f.size, f.mtime);
      } catch (e) {
        await this.#discard(f.name, (e as Error).message);
      }
    }
    await this.#trim();
    this.folder.release?.();
  }

  #check(name: string, h: TensorIndex): Omit<StoredFile, "bytes" | "lastUsed"> {
    return { name, ...checkPageFile(h, this.kv, this.fingerprint, this.states?.snapshotBytes) };
  }

  #add(f: Omit<StoredFile, "bytes" | "lastUsed">, bytes: number, lastUsed: number): void {
    const file = { ...f, bytes, lastUsed };
    this.#files.set(f.name, file);
    for (const c of f.chains) this.#byChain.set(c, file);
    this.bytes += bytes;
    this.onFilesChanged?.();
  }

  async #discard(name: string, why: string): Promise<void> {
    const gone = this.folder.readOnly ? "" : "; deleted";
    console.warn(`[flint] prefix cache: ${this.folder.where}/${name} not used (${why})${gone}`);
    await this.#drop(name);
  }

  /** Files and their first page and pages (what `cache-prompt` copies out). */
  get files(): { name: string; start: number; pages: number }[] {
    return [...this.#files.values()].map((f) => ({ name: f.name, start: f.start, pages: f.chains.length }));
  }

  async #drop(name: string): Promise<void> {
    const f = this.#files.get(name);
    if (f) {
      this.#files.delete(name);
      for (const c of f.chains) if (this.#byChain.get(c) === f) this.#byChain.delete(c);
      this.bytes -= f.bytes;
      this.onFilesChanged?.();
    }
    if (!this.folder.readOnly) await this.folder.remove(name).catch(() => {});
  }

  /** Deletes least recently used files (and the files that continue them) while over the budget. */
  async #trim(): Promise<void> {
    while (this.bytes > this.budgetBytes && this.#files.size) {
      const oldest = [...this.#files.values()].reduce((a, b) => (b.lastUsed < a.lastUsed ? b : a));
      const gone = new Set([oldest.chains[oldest.chains.length - 1]]);
      await this.#drop(oldest.name);
      // Files continuing a deleted one can never be reached from the start of a prompt again.
      for (let changed = true; changed;) {
        changed = false;
        for (const f of this.#files.values()) {
          if (gone.has(f.parent)) {
            gone.add(f.chains[f.chains.length - 1]);
            await this.#drop(f.name);
            changed = true;
          }
        }
      }
    }
  }

  /**
   * The cache is dropping `node` and its page is about to be reused: unless it is written already, it and
   * its unwritten ancestors (still in memory) are copied out by the next group's commands, before anything
   * reuses the page (captureEvicted), and written once that group's read-back arrives (writeEvicted).
   */
  evicting(node: CacheNode): void {
    if (node.stored || this.folder.readOnly) return;
    const run: CacheNode[] = [];
    for (let n: CacheNode | null = node; n && !n.stored; n = n.parent) run.unshift(n);
    if ((this.#evictedPages + run.length) * this.kv.bytesPerPage > this.runBytes) {
      this.dropped++;
      return;
    }
    for (const n of run) n.stored = true;
    this.#evicted.push(run);
    this.#evictedPages += run.length;
  }

  /** Encodes copies of the evicted runs' pages into a staging buffer (first in a group's commands). */
  captureEvicted(enc: GPUCommandEncoder): EvictedPages | null {
    if (!this.#evicted.length) return null;
    const runs = this.#evicted;
    this.#evicted = [];
    const { kv } = this;
    const staging = kv.gpu.memory.create("staging", {
      label: "prefix_evicted",
      size: this.#evictedPages * kv.bytesPerPage,
      usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
    });
    this.#evictedPages = 0;
    let off = 0;
    for (const run of runs) {
      this.#copyPages(enc, run, staging, off);
      off += run.length * kv.bytesPerPage;
    }
    return { runs, staging, read: null };
  }

  /** Maps the copies: call it when the group's own read-back is mapped (the same wait). */
  readEvicted(e: EvictedPages): void {
    e.read = e.staging.mapAsync(GPUMapMode.READ).then(() => {
      const data = new Uint8Array(e.staging.getMappedRange().slice(0));
      e.staging.unmap();
      return data;
    }).finally(() => this.kv.gpu.memory.destroy(e.staging));
  }

  /** Writes one file per evicted run, off the loop (after the read-back readEvicted started). */
  async writeEvicted(e: EvictedPages): Promise<void> {
    if (!e.read) this.readEvicted(e);
    const data = await e.read!;
    let off = 0;
    for (const run of e.runs) {
      const part = data.subarray(off, off + run.length * this.kv.bytesPerPage);
      off += part.byteLength;
      this.#enqueue(run, part);
    }
  }

  /** Writes a run's file after the files already queued (a parent's file before its children's). */
  #enqueue(run: CacheNode[], data: Uint8Array, state?: Uint8Array): void {
    const write = () => this.#write(run, data, state);
    this.#writing = (this.#writing ?? Promise.resolve()).then(write).catch((e) => {
      console.warn(`[flint] prefix cache: writing to ${this.folder.where} failed (${(e as Error).message})`);
      for (const node of run) node.stored = false;
    });
  }

  /** Copies a run's pages to `staging` at `base`: per layer the pages' values, then per layer scales. */
  #copyPages(enc: GPUCommandEncoder, run: CacheNode[], staging: GPUBuffer, base: number): void {
    const { kv } = this;
    const L = kv.shape.layers;
    const valueBytes = run.length * kv.pageValueBytes;
    const scaleBytes = run.length * kv.pageScaleBytes;
    const v = kv.pageValueBytes;
    const sc = kv.pageScaleBytes;
    for (let l = 0; l < L; l++) {
      run.forEach((node, i) => {
        enc.copyBufferToBuffer(kv.layers[l], node.page * v, staging, base + l * valueBytes + i * v, v);
        if (kv.scales) {
          const so = base + L * valueBytes + l * scaleBytes + i * sc;
          enc.copyBufferToBuffer(kv.scales[l], node.page * sc, staging, so, sc);
        }
      });
    }
  }

  /** Cached pages not yet written. */
  get pending(): boolean {
    if (this.folder.readOnly) return false;
    if (this.#evicted.length) return true;
    for (const n of this.cache.nodes()) if (!n.stored) return true;
    return false;
  }

  /** Waits for a file being written (tests, shutdown). */
  async settled(): Promise<void> {
    await this.#writing;
  }

  /**
   * Writes one run of unwritten pages (a parent before its children), reading them back from the GPU; call
   * with nothing else running. Returns false when there was nothing to write.
   */
  spill(): Promise<boolean> {
    // One spill at a time (the idle writer and an explicit flush may both ask): each picks its run after
    // the previous one has marked its pages written.
    const next = this.#spilling.then(() => this.#spillOne());
    this.#spilling = next.catch(() => {});
    return next;
  }

  async #spillOne(): Promise<boolean> {
    await this.#writing;
    if (this.folder.readOnly) return false;
    // Evicted pages no group has copied yet (the loop went idle first): they go before anything else.
    const enc = this.kv.gpu.device.createCommandEncoder({ label: "prefix_evicted" });
    const evicted = this.captureEvicted(enc);
    if (evicted) {
      this.kv.gpu.device.queue.submit([enc.finish()]);
      await this.writeEvicted(evicted);
      return true;
    }
    const run = this.#nextRun();
    if (!run.length) return false;
    const { kv } = this;
    const L = kv.shape.layers;
    const n = run.length;
    const valueBytes = n * kv.pageValueBytes;
    const scaleBytes = n * kv.pageScaleBytes;
    const pages = L * (valueBytes + scaleBytes);
    const last = run[n - 1];
    const states = typeof last.state === "number" ? this.states : null;
    const total = pages + (states?.snapshotBytes ?? 0);
    const gpu = kv.gpu;
    const staging = gpu.memory.create("staging", {
      label: "prefix_spill",
      size: total,
      usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
    });
    let data: ArrayBuffer;
    try {
      const enc = gpu.device.createCommandEncoder({ label: "prefix_spill" });
      this.#copyPages(enc, run, staging, 0);
      states?.encodeRead(enc, last, staging, pages);
      gpu.device.queue.submit([enc.finish()]);
      await staging.mapAsync(GPUMapMode.READ);
      data = staging.getMappedRange().slice(0);
      staging.unmap();
    } finally {
      gpu.memory.destroy(staging);
    }
    for (const node of run) node.stored = true;
    const all = new Uint8Array(data);
    this.#enqueue(run, all.subarray(0, pages), states ? all.subarray(pages) : undefined);
    return true;
  }

  /**
   * The next run to write: an unwritten page whose parent is written, then its unwritten descendants (a
   * stateful model's through the first holding a state snapshot).
   */
  #nextRun(): CacheNode[] {
    const perPage = this.kv.bytesPerPage;
    const maxPages = Math.max(1, Math.floor(this.runBytes / perPage));
    let first: CacheNode | null = null;
    for (const n of this.cache.nodes()) {
      if (!n.stored && n.parent!.stored && (!first || n.lastUsed > first.lastUsed)) first = n;
    }
    const run: CacheNode[] = [];
    for (let n = first; n && !n.stored && run.length < maxPages;) {
      run.push(n);
      if (this.states && typeof n.state === "number") break;
      let next: CacheNode | null = null;
      for (const c of n.children.values()) if (!c.stored && (!next || c.lastUsed > next.lastUsed)) next = c;
      n = next;
    }
    return run;
  }

  async #write(run: CacheNode[], data: Uint8Array, state?: Uint8Array): Promise<void> {
    const { kv } = this;
    const ps = kv.shape.pageSize;
    const n = run.length;
    const start = run[0].depth - 1;
    const tokens = new Uint32Array((start + n) * ps);
    for (let node: CacheNode | null = run[n - 1]; node && node.page >= 0; node = node.parent) {
      tokens.set(node.tokens, (node.depth - 1) * ps);
    }
    const chains = run.map((r) => r.chain);
    const parent = run[0].parent!.chain;
    const f = { fingerprint: this.fingerprint, start, parent, chains, tokens, data, state };
    const parts = encodePageFile(kv, f);
    const name = `${chains[n - 1]}.safetensors`;
    await this.folder.write(name, parts);
    this.#add(
      { name, start, chains, parent, state: !!state },
      parts.reduce((a, p) => a + p.byteLength, 0),
      ++this.#clock,
    );
    await this.#trim();
  }

  /**
   * Extends `matched` (the memory match of `prompt`) with pages from files (prefix_load.ts); returns the
   * pages loaded.
   */
  load(prompt: ArrayLike<number>, matched: CacheNode[], take: (pages: number[]) => void): Promise<number> {
    return loadPages(this, prompt, matched, take);
  }

  /** The file holding the page of chain hash `chain`. */
  fileOf(chain: string): StoredFile | undefined {
    return this.#byChain.get(chain);
  }

  /** Marks a file used now (it is the last the budget deletes). */
  touch(file: StoredFile): void {
    file.lastUsed = ++this.#clock;
  }

  /** Deletes a file that failed a check, with a warning. */
  discard(name: string, why: string): Promise<void> {
    return this.#discard(name, why);
  }
}
