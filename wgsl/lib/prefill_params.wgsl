// Shared by every prefill attention kernel (attention_prefill*.wgsl; the FMA ones include lib/prefill.wgsl
// after it): params and bindings, which keys a position sees, and where a key's row lives in the paged cache.
// Variants (defines): KV8 (q8 cache: codes and their scales), F16_TILES (f16 cache read as 16-byte words),
// WINDOW (sliding window).

override HD: u32 = 128;
override BK: u32 = 32;       // keys per tile

struct Params {
  row0: u32,       // first step row of the segment
  S: u32,          // rows in the segment
  nq: u32,         // query heads
  nkv: u32,        // kv heads
  ps: u32,         // page size (tokens)
  max_pages: u32,  // page-table row length
  scale: f32,      // softmax scale
#ifdef WINDOW
  window: u32,     // sliding window (keys per position, its own included), ≥ 1
#endif
}
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> rows: array<Row>;
@group(0) @binding(2) var<storage, read> q: array<act>;
@group(0) @binding(3) var<storage, read> pages: array<u32>;
#ifdef KV8
@group(0) @binding(4) var<storage, read> kv: array<u32>;
@group(0) @binding(6) var<storage, read> kvs: array<f32>;
#elif F16_TILES
@group(0) @binding(4) var<storage, read> kv: array<vec4<u32>>;
#else
@group(0) @binding(4) var<storage, read> kv: array<act>;
#endif
@group(0) @binding(5) var<storage, read_write> out: array<f32>;

// Which keys j a position sees (causal; WINDOW: and pos − j < window), the first key tile a workgroup whose
// first position is `pos` walks, and the running max a query vector starts from. WINDOW: the walk starts at
// the tile (a multiple of BK, so keys are grouped alike) holding that position's first key. Groups wholly
// masked can then come before any seen key: the max starts above the masked score −3e38 so that they weigh
// e^(−2e38) = 0, not e^0 (whose sum a later rescale would drop, unless an f16 P·V partial overflowed), and
// the state stays exactly zero: the bits do not depend on the tile size. (Causal alone: key 0 is seen first.)
#ifdef WINDOW
fn seen(j: vec4<u32>, pos: u32) -> vec4<bool> {
  return (j <= vec4<u32>(pos)) & (j + vec4<u32>(params.window) > vec4<u32>(pos));
}
fn first_tile(pos: u32) -> u32 { return (pos + 1u - min(pos + 1u, params.window)) / BK * BK; }
const M0: f32 = -1.0e38;
#else
fn seen(j: vec4<u32>, pos: u32) -> vec4<bool> { return j <= vec4<u32>(pos); }
fn first_tile(pos: u32) -> u32 { return 0u; }
const M0: f32 = -3.0e38;
#endif

// Element offset of key j's row in kv head h of the sequence whose page-table row starts at prow.
fn key_row(prow: u32, pstride: u32, h: u32, j: u32) -> u32 {
  let ps = params.ps;
  return pages[prow + j / ps] * pstride + h * ps * HD + (j % ps) * HD;
}
