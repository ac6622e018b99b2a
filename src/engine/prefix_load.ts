/**
 * Loading cached pages from the prefix cache's files (prefix_store.ts): the longest run of the prompt's
 * pages after its memory match whose chain hashes are in files, one file segment at a time: read, checked
 * (checksum, then every token up to the segment's end), uploaded into pages taken from the pool, added to
 * the cache as already written and handed to the sequence before anything can evict them. A model with
 * per-sequence state uses the run only up to its deepest page whose file holds a state snapshot, loaded
 * into the prefix cache's snapshots (prefix_state.ts) for the caller to restore; it takes the pages only
 * once every file up to that one has loaded.
 * @module
 */
import { readHeader } from "../loader/safetensors.ts";
import { type CacheNode, chainHash, reusablePages, ROOT_CHAIN } from "./prefix_cache.ts";
import { pageChecksum } from "./prefix_file.ts";
import type { PrefixStore, StoredFile } from "./prefix_store.ts";

/**
 * Extends `matched` (the memory match of `prompt`) with pages from files: uploaded into pages taken from
 * the pool, added to the cache (as written already) and handed to `take` (the sequence's share) before
 * anything can evict them. Returns the pages loaded; a file that fails its checks is deleted and the load
 * stops before it, as it does when the pool has no pages to spare (a stateful model's then takes none).
 */
export async function loadPages(
  store: PrefixStore,
  prompt: ArrayLike<number>,
  matched: CacheNode[],
  take: (pages: number[]) => void,
): Promise<number> {
  const ps = store.kv.shape.pageSize;
  const limit = reusablePages(prompt.length, ps);
  let chain = matched.length ? matched[matched.length - 1].chain : ROOT_CHAIN;
  const chains: string[] = [];
  for (let i = matched.length; i < limit; i++) {
    chain = chainHash(chain, Array.prototype.slice.call(prompt, i * ps, (i + 1) * ps));
    if (!store.fileOf(chain)) break;
    chains.push(chain);
  }
  const segments: { file: StoredFile; from: number; upto: number }[] = [];
  for (let loaded = 0; loaded < chains.length;) {
    const file = store.fileOf(chains[loaded])!;
    const from = matched.length + loaded - file.start;
    const upto = Math.min(file.chains.length, from + chains.length - loaded);
    segments.push({ file, from, upto });
    loaded += upto - from;
  }
  const states = store.states;
  if (states) {
    // Only up to the deepest segment that ends a file holding the state after its last page.
    const ends = (g: { file: StoredFile; upto: number }) => g.file.state && g.upto === g.file.chains.length;
    while (segments.length && !ends(segments[segments.length - 1])) segments.pop();
  }
  let parent = matched.length ? matched[matched.length - 1] : store.cache.root;
  let loaded = 0;
  const held: number[] = [];
  let state: Uint8Array | undefined;
  for (const seg of segments) {
    const fetched = await fetchFile(store, seg.file);
    const got = await place(store, seg, fetched, prompt, parent);
    if (!got) break;
    parent = got.node;
    loaded += seg.upto - seg.from;
    if (states) {
      held.push(...got.pages);
      state = (fetched as { data: Map<string, Uint8Array> }).data.get("state");
    } else {
      take(got.pages);
      store.kv.release(got.pages);
    }
  }
  if (states) {
    const whole = loaded === segments.reduce((a, g) => a + g.upto - g.from, 0);
    if (loaded && whole && state && states.load(parent, state)) take(held);
    else loaded = 0;
    store.kv.release(held);
  }
  store.folder.release?.();
  return loaded;
}

/** A file's tensors (views of one read of its data region), or why it cannot be read. */
async function fetchFile(
  store: PrefixStore,
  file: StoredFile,
): Promise<{ data: Map<string, Uint8Array>; checksum: string } | Error> {
  const { kv } = store;
  const L = kv.shape.layers;
  const src = store.folder.source;
  const names = ["tokens", ...Array.from({ length: L }, (_, l) => `kv.${l}`)];
  if (kv.scales) names.push(...Array.from({ length: L }, (_, l) => `kv_scale.${l}`));
  if (file.state) names.push("state");
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
    store.loadTimes.read += performance.now() - t0;
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
 * Pages [from, upto) of a fetched file into the pool and the cache under `parent`: the last node and the
 * pages (one reference the caller's), or null if not loaded (a file that fails its checksum is deleted).
 */
async function place(
  store: PrefixStore,
  seg: { file: StoredFile; from: number; upto: number },
  fetched: { data: Map<string, Uint8Array>; checksum: string } | Error,
  prompt: ArrayLike<number>,
  parent: CacheNode,
): Promise<{ node: CacheNode; pages: number[] } | null> {
  const { kv } = store;
  const ps = kv.shape.pageSize;
  const L = kv.shape.layers;
  const { file, from, upto } = seg;
  let t0 = performance.now();
  if (!(fetched instanceof Error) && pageChecksum([...fetched.data.values()]) !== fetched.checksum) {
    fetched = new Error("checksum mismatch");
  }
  store.loadTimes.check += performance.now() - t0;
  if (fetched instanceof Error) {
    await store.discard(file.name, fetched.message);
    return null;
  }
  const data = fetched.data;
  const t = data.get("tokens")!;
  const tok = new Uint32Array(t.slice().buffer);
  for (let i = 0; i < (file.start + upto) * ps; i++) if (tok[i] !== prompt[i]) return null;
  store.touch(file);
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
  store.loadTimes.upload += performance.now() - t0;
  let node = parent;
  for (let i = 0; i < n; i++) {
    const at = (file.start + from + i) * ps;
    const tokens = Uint32Array.from(Array.prototype.slice.call(prompt, at, at + ps));
    node = store.cache.adopt(node, tokens, pages[i], true);
  }
  return { node, pages };
}
