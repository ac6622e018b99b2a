/**
 * The prefix cache's hook for recurrent layers. A hybrid model's gated DeltaNet and conv layers keep a
 * fixed-size state per sequence instead of KV, so a cached run of pages is only a place to resume from if
 * the state after its last token is kept too. A sequence saves its state once, at its prompt's last full
 * page boundary (the prefill chunk is cut there), into a snapshot that joins that page's cache node when the
 * pages are registered; a later prompt that matches the run resumes at the deepest node holding one, its
 * slot's state restored from the snapshot. Snapshots live in a preallocated pool, least recently used
 * given up first; a node without one is only a path to deeper ones. Sliding-window layers' KV rings
 * (kv_ring.ts) are per-slot state too: a snapshot also keeps the ring pages the window before its boundary
 * covers, copied back into the resuming slot's ring.
 * A snapshot travels with its page to the second tier: read back (encodeRead) into the file of the run
 * that ends at its page (prefix_file.ts), and uploaded from it into a snapshot (load) when the page is
 * loaded back, to be restored like one saved in memory.
 * @module
 */
import { type CacheNode, reusablePages } from "./prefix_cache.ts";
import { deltaChunkLen } from "../ops/recurrent.ts";
import { type KvRing, RingSnapshots } from "./kv_ring.ts";
import { RecurrentState } from "./recurrent.ts";

export class PrefixStates {
  readonly #pool: RecurrentState | null;
  readonly #rings: RingSnapshots | null;
  #free: number[];
  /** Snapshot id → the cache node holding it. */
  #held = new Map<number, CacheNode>();

  readonly #queue: GPUQueue;
  /** Tokens per chunk of the chunked DeltaNet prefill (1 without DeltaNet layers). */
  readonly #chunk: number;

  /**
   * `state`: the recurrent layers' (null: none); `ring`: sliding layers' rings and the pages of a window
   * (`ringKeep`) a snapshot keeps of them.
   */
  constructor(
    readonly state: RecurrentState | null,
    readonly count: number,
    ring: KvRing | null = null,
    ringKeep = 0,
  ) {
    this.#pool = state && new RecurrentState(state.gpu, state.config, count, "snapshot");
    this.#rings = ring && new RingSnapshots(ring, count, ringKeep);
    this.#queue = (state?.gpu ?? ring!.gpu).device.queue;
    const d = state?.config.hybrid?.deltanet;
    this.#chunk = d ? deltaChunkLen(state.gpu.info, d.dk, d.dv) : 1;
    this.#free = Array.from({ length: count }, (_, i) => count - 1 - i);
  }

  /** Bytes of the snapshot pool. */
  get bytes(): number {
    return this.count * (this.state?.bytesPerSlot ?? 0) + (this.#rings?.bytes ?? 0);
  }

  /**
   * Where a prompt of `n` tokens saves its state: its last full page boundary that is also a chunk boundary
   * of the chunked DeltaNet prefill (0: none), so a resumed prompt's chunks, and so its bits, are those of
   * a run without the cache.
   */
  boundary(n: number, pageSize: number): number {
    const unit = lcm(pageSize, this.#chunk);
    return Math.floor((reusablePages(n, pageSize) * pageSize) / unit) * unit;
  }

  /**
   * Encodes a copy of `slot`'s state at page boundary `page` into a snapshot (giving up the least recently
   * used node's when none is free) and returns its id; null when every snapshot is pending in other
   * sequences.
   */
  save(enc: GPUCommandEncoder, slot: number, page: number): number | null {
    const id = this.#take();
    if (id === null) return null;
    if (this.state) this.state.encodeCopy(enc, slot, this.#pool!, id);
    this.#rings?.encode(enc, slot, id, page);
    return id;
  }

  /** A free snapshot, else the least recently used node's (null when every one is pending). */
  #take(): number | null {
    const id = this.#free.pop();
    if (id !== undefined) return id;
    let lru: [number, CacheNode] | null = null;
    for (const e of this.#held) if (!lru || e[1].lastUsed < lru[1].lastUsed) lru = e;
    if (!lru) return null;
    this.#held.delete(lru[0]);
    lru[1].state = undefined;
    return lru[0];
  }

  /**
   * One snapshot's buffers, in the order a page file stores them: per recurrent layer its conv state
   * then its DeltaNet state, then per ring layer the `keep` pages' values, then per ring layer their scales.
   */
  #spans(id: number): { buf: GPUBuffer; at: number; bytes: number }[] {
    const out: { buf: GPUBuffer; at: number; bytes: number }[] = [];
    for (const l of this.#pool?.layers ?? []) {
      if (!l) continue;
      out.push({ buf: l.conv, at: id * l.convBytes, bytes: l.convBytes });
      if (l.delta) out.push({ buf: l.delta, at: id * l.deltaBytes, bytes: l.deltaBytes });
    }
    const r = this.#rings;
    if (r) {
      const { pageValueBytes: v, pageScaleBytes: sc } = r.ring.shape;
      for (const b of r.values) out.push({ buf: b, at: id * r.keep * v, bytes: r.keep * v });
      for (const b of r.scales ?? []) out.push({ buf: b, at: id * r.keep * sc, bytes: r.keep * sc });
    }
    return out;
  }

  /** Bytes of one snapshot as a page file stores it. */
  get snapshotBytes(): number {
    return this.#spans(0).reduce((a, s) => a + s.bytes, 0);
  }

  /** Encodes the copy of `node`'s snapshot into `staging` at `offset` (snapshotBytes). */
  encodeRead(enc: GPUCommandEncoder, node: CacheNode, staging: GPUBuffer, offset: number): void {
    for (const s of this.#spans(node.state as number)) {
      enc.copyBufferToBuffer(s.buf, s.at, staging, offset, s.bytes);
      offset += s.bytes;
    }
  }

  /**
   * Uploads a snapshot read from a file (`data`, snapshotBytes) and gives it to `node`; false when every
   * snapshot is pending.
   */
  load(node: CacheNode, data: Uint8Array): boolean {
    if (typeof node.state === "number") return true;
    const id = this.#take();
    if (id === null) return false;
    let off = 0;
    for (const s of this.#spans(id)) {
      this.#queue.writeBuffer(s.buf, s.at, data, off, s.bytes);
      off += s.bytes;
    }
    this.attach(node, id);
    return true;
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

  /** Encodes the copy of `node`'s snapshot, taken at page boundary `page`, into `slot`'s state. */
  restore(enc: GPUCommandEncoder, node: CacheNode, slot: number, page: number): void {
    if (this.state) this.#pool!.encodeCopy(enc, node.state as number, this.state, slot);
    this.#rings?.encode(enc, slot, node.state as number, page, true);
  }

  destroy(): void {
    this.#pool?.destroy();
    this.#rings?.destroy();
  }
}

function lcm(a: number, b: number): number {
  let x = a, y = b;
  while (y) [x, y] = [y, x % y];
  return (a / x) * b;
}
