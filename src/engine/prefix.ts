/**
 * The scheduler's side of prefix caching: the in-memory cache (prefix_cache.ts) and its second tier
 * (prefix_store.ts), from the options; before a sequence's first prefill chunk its row starts with the
 * longest cached prefix (memory, then files); once the loop is idle, cached pages are written to files.
 * @module
 */
import type { SchedulerOptions } from "./generation.ts";
import type { KvPool } from "./kv_pool.ts";
import { PrefixCache } from "./prefix_cache.ts";
import { PrefixStates } from "./prefix_state.ts";
import { PrefixStore } from "./prefix_store.ts";
import type { RecurrentState } from "./recurrent.ts";
import type { Seq } from "./sequence.ts";

export class PrefixReuse {
  /** Null when turned off (`prefixCacheBytes: 0`). */
  readonly cache: PrefixCache | null;
  /** The second tier (a folder of page files), when given a folder. */
  readonly store: PrefixStore | null;
  /** Recurrent layers' and KV rings' snapshots (hybrid and sliding-window models; null otherwise). */
  readonly states: PrefixStates | null;
  /** Snapshots saved by sequences whose pages are not registered yet. */
  readonly #pending = new Map<Seq, { id: number; at: number }>();
  readonly #spillDelayMs: number;
  #spillTimer: ReturnType<typeof setTimeout> | undefined;
  #storeOpen: Promise<void> | null = null;

  /**
   * `recurrent`: the model's per-slot recurrent state, snapshotted for the cache (2 per slot) with the KV
   * rings' window (`window` tokens); the second tier's files hold the snapshots with their pages.
   */
  constructor(
    readonly kv: KvPool,
    opts: SchedulerOptions,
    recurrent: RecurrentState | null = null,
    window = 0,
  ) {
    const budget = opts.prefixCacheBytes === undefined
      ? kv.shape.numPages
      : Math.min(kv.shape.numPages, Math.floor(opts.prefixCacheBytes / kv.bytesPerPage));
    this.cache = budget > 0 ? new PrefixCache(kv, budget) : null;
    const stateful = recurrent !== null || kv.ring !== null;
    // A ring snapshot keeps the pages rows after its boundary can see (up to the whole ring).
    const keep = Math.min(kv.shape.ring?.pages ?? 0, Math.ceil(window / kv.shape.pageSize));
    this.states = this.cache && stateful
      ? new PrefixStates(recurrent, 2 * kv.shape.maxSlots, kv.ring, keep)
      : null;
    const f = opts.prefixFolder;
    this.store = f && this.cache
      ? new PrefixStore(kv, this.cache, f.folder, f.fingerprint, f.budgetBytes, this.states)
      : null;
    this.#spillDelayMs = f?.idleMs ?? 1000;
    const { store, states } = this;
    if (store || states) {
      this.cache!.onEvict = (node) => {
        store?.evicting(node);
        states?.evicted(node);
      };
    }
  }

  /**
   * Where a prefill chunk of `s` starting at `from` must end (≤ `to`): hybrid models cut it at the prompt's
   * last full page boundary, where the state is saved.
   */
  chunkEnd(s: Seq, from: number, to: number): number {
    if (!this.states) return to;
    const b = this.states.boundary(s.req.prompt.length, this.kv.shape.pageSize);
    return from < b && to > b ? b : to;
  }

  /** After `s`'s chunk ending at `end` is encoded: saves its state there if that is its boundary. */
  afterChunk(enc: GPUCommandEncoder, s: Seq, end: number): void {
    const st = this.states;
    if (!st || end === 0 || end !== st.boundary(s.req.prompt.length, this.kv.shape.pageSize)) return;
    const id = st.save(enc, s.slot, end / this.kv.shape.pageSize);
    if (id !== null) this.#pending.set(s, { id, at: end });
  }

  /** `s` ended: a snapshot its pages never took is freed. */
  forget(s: Seq): void {
    const p = this.#pending.get(s);
    if (p) this.states!.release(p.id);
    this.#pending.delete(s);
  }

  /** Before `s`'s first prefill chunk: its row starts with the cached prefix, its prefill after it. */
  async reuse(s: Seq): Promise<void> {
    s.looked = true;
    const { cache, kv, states, store } = this;
    if (!cache) return;
    const matched = cache.match(s.req.prompt);
    // A hybrid model's match ends at its deepest snapshot, unless files continue all of it to a deeper one.
    let nodes = states ? states.cut(matched) : matched;
    let loaded = 0;
    if (store) {
      kv.share(s.slot, s.pages, matched.map((n) => n.page));
      this.#storeOpen ??= store.open();
      await this.#storeOpen;
      loaded = await store.load(s.req.prompt, matched, (pages) => kv.share(s.slot, s.pages, pages));
      if (loaded || !states) nodes = matched;
      else kv.release(s.pages.splice(nodes.length));
    } else kv.share(s.slot, s.pages, nodes.map((n) => n.page));
    const pages = nodes.length + loaded;
    if (states && pages) this.#resume(s, pages);
    s.cached = s.prefilled = pages * cache.pageSize;
    cache.count(s.cached, loaded * cache.pageSize);
  }

  /** The slot's state becomes the snapshot of the node at page `pages` of its prompt. */
  #resume(s: Seq, pages: number): void {
    const gpu = this.kv.gpu;
    const enc = gpu.device.createCommandEncoder({ label: "prefix state" });
    this.states!.restore(enc, this.cache!.nodeAt(s.req.prompt, pages)!, s.slot, pages);
    gpu.device.queue.submit([enc.finish()]);
  }

  /** `s`'s pages up to position `processed` are written (read back after them): later prompts may share. */
  written(s: Seq, processed: number): void {
    this.cache?.register(s.req.prompt, s.pages, processed);
    const p = this.#pending.get(s);
    if (!p || processed < p.at) return;
    this.#pending.delete(s);
    this.states!.attach(this.cache!.nodeAt(s.req.prompt, p.at / this.kv.shape.pageSize), p.id);
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
    this.states?.destroy();
  }
}
