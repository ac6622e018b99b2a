/**
 * The prefix cache's hook for recurrent layers. A hybrid model's gated DeltaNet and conv layers keep a
 * fixed-size state per sequence instead of KV, so a cached run of pages is only a place to resume from if
 * the state after its last token is kept too. A sequence saves its state once, at its prompt's last full
 * page boundary (the prefill chunk is cut there), into a snapshot that joins that page's cache node when the
 * pages are registered; a later prompt that matches the run resumes at the deepest node holding one, its
 * slot's state restored from the snapshot. Snapshots live in a preallocated pool, least recently used
 * given up first; a node without one is only a path to deeper ones.
 * @module
 */
import { type CacheNode, reusablePages } from "./prefix_cache.ts";
import { RecurrentState } from "./recurrent.ts";

export class PrefixStates {
  readonly #pool: RecurrentState;
  #free: number[];
  /** Snapshot id → the cache node holding it. */
  #held = new Map<number, CacheNode>();

  constructor(readonly state: RecurrentState, readonly count: number) {
    this.#pool = new RecurrentState(state.gpu, state.config, count, "snapshot");
    this.#free = Array.from({ length: count }, (_, i) => count - 1 - i);
  }

  /** Bytes of the snapshot pool. */
  get bytes(): number {
    return this.count * this.state.bytesPerSlot;
  }

  /** Where a prompt of `n` tokens saves its state: its last full page boundary (0: none). */
  boundary(n: number, pageSize: number): number {
    return reusablePages(n, pageSize) * pageSize;
  }

  /**
   * Encodes a copy of `slot`'s state into a snapshot (giving up the least recently used node's when none is
   * free) and returns its id; null when every snapshot is pending in other sequences.
   */
  save(enc: GPUCommandEncoder, slot: number): number | null {
    let id = this.#free.pop();
    if (id === undefined) {
      let lru: [number, CacheNode] | null = null;
      for (const e of this.#held) if (!lru || e[1].lastUsed < lru[1].lastUsed) lru = e;
      if (!lru) return null;
      id = lru[0];
      this.#held.delete(id);
      lru[1].state = undefined;
    }
    this.state.encodeCopy(enc, slot, this.#pool, id);
    return id;
  }

  /** Gives snapshot `id` to `node` (or frees it when the node has one already). */
  attach(node: CacheNode | null, id: number): void {
    if (!node || node.state !== undefined) return this.release(id);
    node.state = id;
    this.#held.set(id, node);
  }

  release(id: number): void {
    this.#free.push(id);
  }

  /** A node leaving the cache frees its snapshot. */
  evicted(node: CacheNode): void {
    if (typeof node.state !== "number") return;
    this.#held.delete(node.state);
    this.release(node.state);
    node.state = undefined;
  }

  /** `nodes` (a match) cut after the deepest node holding a snapshot. */
  cut(nodes: CacheNode[]): CacheNode[] {
    let n = nodes.length;
    while (n > 0 && typeof nodes[n - 1].state !== "number") n--;
    return nodes.slice(0, n);
  }

  /** Encodes the copy of `node`'s snapshot into `slot`'s state. */
  restore(enc: GPUCommandEncoder, node: CacheNode, slot: number): void {
    this.#pool.encodeCopy(enc, node.state as number, this.state, slot);
  }

  destroy(): void {
    this.#pool.destroy();
  }
}
