/**
 * The scheduler's side of prefix caching: the in-memory cache (prefix_cache.ts) and its second tier
 * (prefix_store.ts), from the options; before a sequence's first prefill chunk its row starts with the
 * longest cached prefix (memory, then files); once the loop is idle, cached pages are written to files.
 * @module
 */
import type { SchedulerOptions } from "./generation.ts";
import type { KvPool } from "./kv_pool.ts";
import { PrefixCache } from "./prefix_cache.ts";
import { PrefixStore } from "./prefix_store.ts";
import type { Seq } from "./sequence.ts";

export class PrefixReuse {
  /** Null when turned off (`prefixCacheBytes: 0`). */
  readonly cache: PrefixCache | null;
  /** The second tier (a folder of page files), when given a folder. */
  readonly store: PrefixStore | null;
  readonly #spillDelayMs: number;
  #spillTimer: ReturnType<typeof setTimeout> | undefined;
  #storeOpen: Promise<void> | null = null;

  constructor(readonly kv: KvPool, opts: SchedulerOptions) {
    const budget = opts.prefixCacheBytes === undefined
      ? kv.shape.numPages
      : Math.min(kv.shape.numPages, Math.floor(opts.prefixCacheBytes / kv.bytesPerPage));
    this.cache = budget > 0 ? new PrefixCache(kv, budget) : null;
    const f = opts.prefixFolder;
    this.store = f && this.cache
      ? new PrefixStore(kv, this.cache, f.folder, f.fingerprint, f.budgetBytes)
      : null;
    this.#spillDelayMs = f?.idleMs ?? 1000;
    const store = this.store;
    if (store) this.cache!.onEvict = (node) => store.evicting(node);
  }

  /** Before `s`'s first prefill chunk: its row starts with the cached prefix, its prefill after it. */
  async reuse(s: Seq): Promise<void> {
    s.looked = true;
    const { cache, kv } = this;
    if (!cache) return;
    const nodes = cache.match(s.req.prompt);
    kv.share(s.slot, s.pages, nodes.map((n) => n.page));
    let loaded = 0;
    if (this.store) {
      this.#storeOpen ??= this.store.open();
      await this.#storeOpen;
      loaded = await this.store.load(s.req.prompt, nodes, (pages) => kv.share(s.slot, s.pages, pages));
    }
    s.cached = s.prefilled = (nodes.length + loaded) * cache.pageSize;
    cache.count(s.cached, loaded * cache.pageSize);
  }

  /** `s`'s pages up to position `processed` are written (read back after them): later prompts may share. */
  written(s: Seq, processed: number): void {
    this.cache?.register(s.req.prompt, s.pages, processed);
  }

  /**
   * After the spill delay of an idle loop (`busy()` false), writes cached pages not yet in files, a run at
   * a time, until work arrives.
   */
  scheduleSpill(busy: () => boolean): void {
    const store = this.store;
    if (!store?.pending) return;
    clearTimeout(this.#spillTimer);
    this.#spillTimer = setTimeout(async () => {
      const failed = (e: Error) => {
        console.warn(`[flint] prefix cache: writing pages failed (${e.message})`);
        return false;
      };
      while (!busy() && (await store.spill().catch(failed)));
    }, this.#spillDelayMs);
  }

  /** Writes every cached page to files now and waits for them (tests, `cache-prompt`). */
  async flush(): Promise<void> {
    while (this.store && (await this.store.spill()));
    await this.store?.settled();
  }

  close(): void {
    clearTimeout(this.#spillTimer);
  }
}
