/**
 * The paged KV layout, written once for the references: per layer a pool (pages, 2, nkv, ps, hd) — K then
 * V inside each page — and a page table (slots, maxPages) of page ids. Position p of slot s lives in page
 * table[s·maxPages + p / ps], token p % ps.
 * @module
 */

/** One step row, as `struct Row` in wgsl/lib/common.wgsl. */
export interface Row {
  token: number;
  pos: number;
  slot: number;
  /** 0 prefill, 1 decode. */
  kind: number;
}

export interface PagedKv {
  pages: Uint32Array;
  maxPages: number;
  nkv: number;
  ps: number;
  hd: number;
}

/** Element offset of (slot, pos, K or V, kv head h, dim 0) in the pool. */
export function kvOffset(p: PagedKv, slot: number, pos: number, which: 0 | 1, h: number): number {
  const page = p.pages[slot * p.maxPages + Math.floor(pos / p.ps)];
  return (((page * 2 + which) * p.nkv + h) * p.ps + (pos % p.ps)) * p.hd;
}

/** Rows as the bytes of a `array<Row>` buffer. */
export function encodeRows(rows: Row[]): Uint32Array {
  const out = new Uint32Array(rows.length * 4);
  rows.forEach((r, i) => out.set([r.token, r.pos, r.slot, r.kind], 4 * i));
  return out;
}
