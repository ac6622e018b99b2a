/**
 * The prefix cache's second tier: cached pages written to safetensors files in a folder of one model
 * fingerprint, so they outlive eviction and restarts. A file holds a run of consecutive pages of one
 * prefix (format: prefix_file.ts).
 * Pages are written while the scheduler is idle (spill), read when a prompt misses in memory (load). A file
 * that does not parse, is short, fails its checksum or names another fingerprint is deleted, never used.
 * @module
 */
import { readHeader, type TensorIndex } from "../loader/safetensors.ts";
import type { ModelSource } from "../platform/mod.ts";
import type { KvPool } from "./kv_pool.ts";
import { type CacheNode, chainHash, PrefixCache, reusablePages, ROOT_CHAIN } from "./prefix_cache.ts";
import { checkPageFile, encodePageFile, pageChecksum } from "./prefix_file.ts";

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

interface StoredFile {
  name: string;
  bytes: number;
  /** Index of its first page in the prefix, and its pages' chain hashes. */
  start: number;
  chains: string[];
  parent: string;
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
    return { name, ...checkPageFile(h, this.kv, this.fingerprint) };
  }

  #add(f: Omit<StoredFile, "bytes" | "lastUsed">, bytes: number, lastUsed: number): void {
    const file = { ...f, bytes, lastUsed };
    this.#files.set(f.name, file);
    for (const c of f.chains) this.#byChain.set(c, file);
    this.bytes += bytes;
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
          if (gone.has(f.parent) || (f.parent !== ROOT_CHAIN && !this.#byChain.has(f.parent))) {
            gone.add(f.chains[f.chains.length - 1]);
            await this.#drop(f.name);
            changed = true;
          }
        }
      }
    }
  }

  /** Cached pages not yet written. */
  get pending(): boolean {
    if (this.folder.readOnly) return false;
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
    const run = this.#nextRun();
    if (!run.length) return false;
    const { kv } = this;
    const L = kv.shape.layers;
    const n = run.length;
    const valueBytes = n * kv.pageValueBytes;
    const scaleBytes = n * kv.pageScaleBytes;
    const total = L * (valueBytes + scaleBytes);
    const gpu = kv.gpu;
    const staging = gpu.memory.create("staging", {
      label: "prefix_spill",
      size: total,
      usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
    });
    let data: ArrayBuffer;
    try {
      const enc = gpu.device.createCommandEncoder({ label: "prefix_spill" });
      for (let l = 0; l < L; l++) {
        run.forEach((node, i) => {
          const vo = l * valueBytes + i * kv.pageValueBytes;
          enc.copyBufferToBuffer(kv.layers[l], node.page * kv.pageValueBytes, staging, vo, kv.pageValueBytes);
          if (kv.scales) {
            const so = L * valueBytes + l * scaleBytes + i * kv.pageScaleBytes;
            enc.copyBufferToBuffer(
              kv.scales[l],
              node.page * kv.pageScaleBytes,
              staging,
              so,
              kv.pageScaleBytes,
            );
          }
        });
      }
      gpu.device.queue.submit([enc.finish()]);
      await staging.mapAsync(GPUMapMode.READ);
      data = staging.getMappedRange().slice(0);
      staging.unmap();
    } finally {
      gpu.memory.destroy(staging);
    }
    for (const node of run) node.stored = true;
    this.#writing = this.#write(run, new Uint8Array(data)).catch((e) => {
      console.warn(`[flint] prefix cache: writing to ${this.folder.where} failed (${(e as Error).message})`);
      for (const node of run) node.stored = false;
    });
    return true;
  }

  /** The next run to write: an unwritten page whose parent is written, then its unwritten descendants. */
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
      let next: CacheNode | null = null;
      for (const c of n.children.values()) if (!c.stored && (!next || c.lastUsed > next.lastUsed)) next = c;
      n = next;
    }
    return run;
  }

  async #write(run: CacheNode[], data: Uint8Array): Promise<void> {
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
    const parts = encodePageFile(kv, { fingerprint: this.fingerprint, start, parent, chains, tokens, data });
    const name = `${chains[n - 1]}.safetensors`;
    await this.folder.write(name, parts);
    this.#add(
      { name, start, chains, parent },
      parts.reduce((a, p) => a + p.byteLength, 0),
      ++this.#clock,
    );
    await this.#trim();
  }

  /**
   * Extends `matched` (the memory match of `prompt`) with pages from files: uploaded into pages taken from
   * the pool, added to the cache (as written already) and handed to `take` (the sequence's share) before
   * anything can evict them. Returns the pages loaded; a file that fails its checks is deleted and the load
   * stops before it, as it does when the pool has no pages to spare.
   */
  async load(
    prompt: ArrayLike<number>,
    matched: CacheNode[],
    take: (pages: number[]) => void,
  ): Promise<number> {
    const ps = this.kv.shape.pageSize;
    const limit = reusablePages(prompt.length, ps);
    let chain = matched.length ? matched[matched.length - 1].chain : ROOT_CHAIN;
    const chains: string[] = [];
    for (let i = matched.length; i < limit; i++) {
      chain = chainHash(chain, Array.prototype.slice.call(prompt, i * ps, (i + 1) * ps));
      if (!this.#byChain.has(chain)) break;
      chains.push(chain);
    }
    const segments: { file: StoredFile; from: number; upto: number }[] = [];
    for (let loaded = 0; loaded < chains.length;) {
      const file = this.#byChain.get(chains[loaded])!;
      const from = matched.length + loaded - file.start;
      const upto = Math.min(file.chains.length, from + chains.length - loaded);
      segments.push({ file, from, upto });
      loaded += upto - from;
    }
    let parent = matched.length ? matched[matched.length - 1] : this.cache.root;
    let loaded = 0;
    for (const seg of segments) {
      const got = await this.#place(seg, await this.#fetch(seg.file), prompt, parent, take);
      if (!got) break;
      parent = got;
      loaded += seg.upto - seg.from;
    }
    this.folder.release?.();
    return loaded;
  }

  /** A file's tensors (views of one read of its data region), or why it cannot be read. */
  async #fetch(file: StoredFile): Promise<{ data: Map<string, Uint8Array>; checksum: string } | Error> {
    const { kv } = this;
    const L = kv.shape.layers;
    const src = this.folder.source;
    const names = ["tokens", ...Array.from({ length: L }, (_, l) => `kv.${l}`)];
    if (kv.scales) names.push(...Array.from({ length: L }, (_, l) => `kv_scale.${l}`));
    try {
      const h = await readHeader(src, file.name);
      const spans = names.map((k) => {
        const t = h.tensors.get(k);
        if (!t) throw new Error(`no tensor ${k}`);
        return t;
      });
      const start = Math.min(...spans.map((t) => t.offset));
      const end = Math.max(...spans.map((t) => t.offset + t.byteLength));
      const t0 = performance.now();
      const all = await src.read(file.name, start, end - start);
      this.loadTimes.read += performance.now() - t0;
      const data = new Map<string, Uint8Array>();
      spans.forEach((t, i) =>
        data.set(names[i], all.subarray(t.offset - start, t.offset - start + t.byteLength))
      );
      return { data, checksum: h.metadata.checksum };
    } catch (e) {
      return e as Error;
    }
  }

  /**
   * Pages [from, upto) of a fetched file into the pool and the cache under `parent`; null if not loaded
   * (a file that fails its checksum is deleted).
   */
  async #place(
    seg: { file: StoredFile; from: number; upto: number },
    fetched: { data: Map<string, Uint8Array>; checksum: string } | Error,
    prompt: ArrayLike<number>,
    parent: CacheNode,
    take: (pages: number[]) => void,
  ): Promise<CacheNode | null> {
    const { kv } = this;
    const ps = kv.shape.pageSize;
    const L = kv.shape.layers;
    const { file, from, upto } = seg;
    let t0 = performance.now();
    if (!(fetched instanceof Error) && pageChecksum([...fetched.data.values()]) !== fetched.checksum) {
      fetched = new Error("checksum mismatch");
    }
    this.loadTimes.check += performance.now() - t0;
    if (fetched instanceof Error) {
      await this.#discard(file.name, fetched.message);
      return null;
    }
    const data = fetched.data;
    const t = data.get("tokens")!;
    const tok = new Uint32Array(t.slice().buffer);
    for (let i = 0; i < (file.start + upto) * ps; i++) if (tok[i] !== prompt[i]) return null;
    file.lastUsed = ++this.#clock;
    const n = upto - from;
    let pages: number[];
    try {
      pages = kv.alloc(n);
    } catch {
      return null;
    }
    // Runs of consecutive page ids (a fresh pool hands them out in order) go up in one write per layer.
    t0 = performance.now();
    const q = kv.gpu.device.queue;
    for (let i = 0; i < n;) {
      let j = i + 1;
      while (j < n && pages[j] === pages[j - 1] + 1) j++;
      for (let l = 0; l < L; l++) {
        const v = kv.pageValueBytes;
        q.writeBuffer(kv.layers[l], pages[i] * v, data.get(`kv.${l}`)!, (from + i) * v, (j - i) * v);
        const sc = kv.pageScaleBytes;
        const scales = data.get(`kv_scale.${l}`);
        if (scales) q.writeBuffer(kv.scales![l], pages[i] * sc, scales, (from + i) * sc, (j - i) * sc);
      }
      i = j;
    }
    this.loadTimes.upload += performance.now() - t0;
    let node = parent;
    for (let i = 0; i < n; i++) {
      const at = (file.start + from + i) * ps;
      const tokens = Uint32Array.from(Array.prototype.slice.call(prompt, at, at + ps));
      node = this.cache.adopt(node, tokens, pages[i], true);
    }
    take(pages);
    kv.release(pages);
    return node;
  }
}
