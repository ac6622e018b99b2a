/**
 * The prefix cache: a tree of full KV pages keyed by their token ids (after the chat template, so every API
 * shares it). A new sequence takes the longest cached run of pages from the root, points its page table at
 * them (reference-counted in kv_pool.ts, never written again) and prefills only the rest. A match always
 * stops at a page boundary and at least one prompt token is left to run for its logits: the partial page
 * is recomputed, never copied (bench/NOTES.md, "Prefix cache").
 * Pages held only by the cache are evicted least recently used first, leaves before their parents, when
 * the cache passes its budget or a request needs pages. A second tier (PageStore, the disk) keeps pages
 * that leave memory.
 * @module
 */
import type { KvPool } from "./kv_pool.ts";

/** One cached page: the `pageSize` tokens it holds, after the tokens of its ancestors. */
export interface CacheNode {
  parent: CacheNode | null;
  tokens: Uint32Array;
  /** The KV page, or −1 for the root. */
  page: number;
  /** Hash of every token from the start of the prompt through this page (16 hex digits). */
  chain: string;
  /** Pages from the root through this one. */
  depth: number;
  children: Map<string, CacheNode>;
  lastUsed: number;
  /** Its bytes are in the second tier (nothing to write before it is evicted). */
  stored: boolean;
  /**
   * A recurrent layer's state after this page's last token (hybrid models keep a fixed-size state, not KV,
   * in most layers): what a sequence resuming here starts from. Unused by attention-only models.
   */
  state?: unknown;
}

export interface PrefixCacheStats {
  hits: number;
  misses: number;
  /** Prompt tokens taken from the cache instead of prefilled (memory and the second tier). */
  tokensReused: number;
  /** Of those, tokens loaded from the second tier. */
  tokensLoaded: number;
  evictions: number;
  pages: number;
  budgetPages: number;
  /** Pages held by the cache alone (no running sequence points at them). */
  idlePages: number;
}

/** Chain hash of `tokens` after the chain `prev` (two 32-bit lanes of a murmur-style mix). */
export function chainHash(prev: string, tokens: ArrayLike<number>): string {
  let a = parseInt(prev.slice(0, 8), 16) ^ 0x9e3779b9;
  let b = parseInt(prev.slice(8, 16), 16) ^ 0x85ebca6b;
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i] >>> 0;
    a = Math.imul(a ^ t, 0xcc9e2d51);
    a = Math.imul((a << 15) | (a >>> 17), 0x1b873593) ^ b;
    b = Math.imul(b ^ Math.imul(t, 0x27d4eb2f), 0x165667b1);
    b = Math.imul((b << 13) | (b >>> 19), 0xc2b2ae35) ^ a;
  }
  a = Math.imul(a ^ (a >>> 16), 0x85ebca6b);
  b = Math.imul(b ^ (b >>> 13), 0xc2b2ae35);
  a ^= b >>> 7;
  b ^= a >>> 11;
  return (a >>> 0).toString(16).padStart(8, "0") + (b >>> 0).toString(16).padStart(8, "0");
}

export const ROOT_CHAIN = "0000000000000000";

/** Pages a prompt of `n` tokens may take from the cache: whole pages, leaving its last token to run. */
export function reusablePages(n: number, pageSize: number): number {
  return Math.floor((n - 1) / pageSize);
}

function pageKey(tokens: ArrayLike<number>): string {
  return Array.prototype.join.call(tokens, ",");
}

export class PrefixCache {
  readonly root: CacheNode = {
    parent: null,
    tokens: new Uint32Array(0),
    page: -1,
    chain: ROOT_CHAIN,
    depth: 0,
    children: new Map(),
    lastUsed: 0,
    stored: true,
  };
  readonly stats: Omit<PrefixCacheStats, "pages" | "budgetPages" | "idlePages"> = {
    hits: 0,
    misses: 0,
    tokensReused: 0,
    tokensLoaded: 0,
    evictions: 0,
  };
  readonly pageSize: number;
  #nodes = new Set<CacheNode>();
  #clock = 0;
  /** Called with each node leaving memory, before its page can be reused (the second tier's hook). */
  onEvict: ((node: CacheNode) => void) | null = null;

  constructor(readonly kv: KvPool, readonly budgetPages: number) {
    this.pageSize = kv.shape.pageSize;
    kv.reclaimer = {
      reclaimable: () => this.idlePages,
      reclaim: (n) => this.evict(n),
    };
  }

  get pages(): number {
    return this.#nodes.size;
  }
  get idlePages(): number {
    let n = 0;
    for (const node of this.#nodes) if (this.kv.refs(node.page) === 1) n++;
    return n;
  }
  snapshot(): PrefixCacheStats {
    return { ...this.stats, pages: this.pages, budgetPages: this.budgetPages, idlePages: this.idlePages };
  }
  nodes(): IterableIterator<CacheNode> {
    return this.#nodes.values();
  }

  /**
   * The longest run of cached pages `prompt` starts with, at most `reusablePages` of them, marked as used
   * now. The caller shares their pages (KvPool.share) before anything else can evict them.
   */
  match(prompt: ArrayLike<number>): CacheNode[] {
    const ps = this.pageSize;
    const out: CacheNode[] = [];
    const tick = ++this.#clock;
    let node = this.root;
    for (let i = 0; i < reusablePages(prompt.length, ps); i++) {
      const next = node.children.get(pageKey(Array.prototype.slice.call(prompt, i * ps, (i + 1) * ps)));
      if (!next) break;
      next.lastUsed = tick;
      out.push(next);
      node = next;
    }
    return out;
  }

  /** The cached node of `prompt`'s first `pages` pages, or null when they are not all cached. */
  nodeAt(prompt: ArrayLike<number>, pages: number): CacheNode | null {
    const ps = this.pageSize;
    let node = this.root;
    for (let i = 0; i < pages; i++) {
      const next = node.children.get(pageKey(Array.prototype.slice.call(prompt, i * ps, (i + 1) * ps)));
      if (!next) return null;
      node = next;
    }
    return node;
  }

  /** Counts one request's lookup: `tokens` reused (0: a miss), `loaded` of them from the second tier. */
  count(tokens: number, loaded = 0): void {
    if (tokens) this.stats.hits++;
    else this.stats.misses++;
    this.stats.tokensReused += tokens;
    this.stats.tokensLoaded += loaded;
  }

  /**
   * Adds the full pages of `prompt` among positions 0 .. written−1, whose KV is in `pages` (a sequence's
   * row, finished on the GPU). Pages already cached under the same tokens stay as they are; the cache takes
   * a reference on each page it adds. Stops when the budget is full of pages that running sequences hold.
   */
  register(prompt: ArrayLike<number>, pages: number[], written: number): void {
    const ps = this.pageSize;
    const full = Math.min(Math.floor(written / ps), pages.length);
    const tick = ++this.#clock;
    let node = this.root;
    for (let i = 0; i < full; i++) {
      const tokens = Uint32Array.from(Array.prototype.slice.call(prompt, i * ps, (i + 1) * ps));
      const key = pageKey(tokens);
      let next = node.children.get(key);
      if (!next) {
        if (this.#nodes.size >= this.budgetPages && this.evict(1, node) < 1) return;
        next = this.adopt(node, tokens, pages[i], false);
      }
      next.lastUsed = tick;
      node = next;
    }
  }

  /** Adds a child of `parent` holding `page` (the cache takes a reference on it). */
  adopt(parent: CacheNode, tokens: Uint32Array, page: number, stored: boolean): CacheNode {
    this.kv.retain(page);
    const node: CacheNode = {
      parent,
      tokens,
      page,
      chain: chainHash(parent.chain, tokens),
      depth: parent.depth + 1,
      children: new Map(),
      lastUsed: this.#clock,
      stored,
    };
    parent.children.set(pageKey(tokens), node);
    this.#nodes.add(node);
    return node;
  }

  /**
   * Evicts up to `n` pages held by the cache alone, least recently used leaves first (never `keep` or its
   * ancestors); returns how many were freed.
   */
  evict(n: number, keep: CacheNode | null = null): number {
    const kept = new Set<CacheNode>();
    for (let k = keep; k; k = k.parent) kept.add(k);
    let freed = 0;
    while (freed < n) {
      let victim: CacheNode | null = null;
      for (const node of this.#nodes) {
        if (node.children.size || kept.has(node) || this.kv.refs(node.page) !== 1) continue;
        if (!victim || node.lastUsed < victim.lastUsed) victim = node;
      }
      if (!victim) break;
      this.#drop(victim);
      freed++;
    }
    return freed;
  }

  /** Drops every page the cache alone holds (tests; `--prefix-cache-bytes 0` never fills it). */
  clear(): void {
    this.evict(Infinity);
  }

  #drop(node: CacheNode): void {
    this.onEvict?.(node);
    node.parent!.children.delete(pageKey(node.tokens));
    this.#nodes.delete(node);
    this.kv.release([node.page]);
    this.stats.evictions++;
  }
}
