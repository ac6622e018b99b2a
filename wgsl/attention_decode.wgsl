// Decode attention over the paged KV cache, split along the keys (flash-decoding), first half:
//   for row r, kv head h, split s: keys j in [s·SPLIT, min((s+1)·SPLIT, pos_r + 1)), the G = nq/nkv query heads
//   of h (GQA: each K/V row is read once for all G heads):
//     m = max_j q·k_j·scale,  l = Σ_j e^(q·k_j·scale − m),  o = Σ_j e^(q·k_j·scale − m) · v_j
//   written unnormalised; attention_combine.wgsl merges the splits in order.
// Bindings:  rows  (R)                      step rows: pos, slot
//            q     (R, nq·hd) act
//            pages (slots, max_pages) u32
//            kv    (pages, 2, nkv, ps, hd) act
//            opart (R, nq, max_split, hd) f32
//            ml    (R, nq, max_split) vec2<f32>  (m, l)
// Grid: (n rows, nkv, splits); splits = ceil(longest KV / SPLIT), splits past a row's length exit at once.
// Workgroup: HD lanes (one per head dim in the V pass; one per key in the score pass).
#include "lib/common.wgsl"

override HD: u32 = 128;      // head dim = workgroup size
override G: u32 = 1;         // query heads per kv head
override SPLIT: u32 = 256;   // keys per split
override P2: u32 = 128;      // HD rounded up to a power of two (reduction tree)

struct Params {
  row0: u32,       // first step row handled
  nq: u32,         // query heads
  nkv: u32,        // kv heads
  ps: u32,         // page size (tokens)
  max_pages: u32,  // page-table row length
  max_split: u32,  // split capacity of opart/ml
  scale: f32,      // softmax scale, usually hd^-0.5
}
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> rows: array<Row>;
@group(0) @binding(2) var<storage, read> q: array<act>;
@group(0) @binding(3) var<storage, read> pages: array<u32>;
@group(0) @binding(4) var<storage, read> kv: array<act>;
@group(0) @binding(5) var<storage, read_write> opart: array<f32>;
@group(0) @binding(6) var<storage, read_write> ml: array<vec2<f32>>;

var<workgroup> qs: array<f32, G * HD>;
var<workgroup> sc: array<f32, G * SPLIT>;
var<workgroup> red: array<f32, HD>;

@compute @workgroup_size(HD)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let r = params.row0 + wid.x;
  let h = wid.y;
  let s = wid.z;
  let row = rows[r];
  let len = row.pos + 1u;
  let j0 = s * SPLIT;
  if (j0 >= len) { return; }
  let nj = min(SPLIT, len - j0);
  let nq = params.nq;
  let nkv = params.nkv;
  let ps = params.ps;
  let pstride = 2u * nkv * ps * HD;  // elements per page
  let prow = row.slot * params.max_pages;

  for (var g = 0u; g < G; g++) {
    qs[g * HD + lid] = f32(q[r * nq * HD + (h * G + g) * HD + lid]) * params.scale;
  }
  workgroupBarrier();

  // Scores: one lane per key.
  for (var t = lid; t < nj; t += HD) {
    let j = j0 + t;
    let kb = pages[prow + j / ps] * pstride + h * ps * HD + (j % ps) * HD;
    var dots: array<f32, 16>;
    for (var g = 0u; g < G; g++) { dots[g] = 0.0; }
    for (var d = 0u; d < HD; d++) {
      let kd = f32(kv[kb + d]);
      for (var g = 0u; g < G; g++) { dots[g] = fma(qs[g * HD + d], kd, dots[g]); }
    }
    for (var g = 0u; g < G; g++) { sc[g * SPLIT + t] = dots[g]; }
  }
  workgroupBarrier();

  // Per head: max and exponentials (fixed-order reductions).
  for (var g = 0u; g < G; g++) {
    var mx = -3.0e38;
    for (var t = lid; t < nj; t += HD) { mx = max(mx, sc[g * SPLIT + t]); }
    red[lid] = mx;
    workgroupBarrier();
    for (var st = P2 / 2u; st > 0u; st = st >> 1u) {
      if (lid < st && lid + st < HD) { red[lid] = max(red[lid], red[lid + st]); }
      workgroupBarrier();
    }
    mx = red[0];
    workgroupBarrier();
    var sum = 0.0;
    for (var t = lid; t < nj; t += HD) {
      let p = exp(sc[g * SPLIT + t] - mx);
      sc[g * SPLIT + t] = p;
      sum += p;
    }
    red[lid] = sum;
    workgroupBarrier();
    for (var st = P2 / 2u; st > 0u; st = st >> 1u) {
      if (lid < st && lid + st < HD) { red[lid] = red[lid] + red[lid + st]; }
      workgroupBarrier();
    }
    if (lid == 0u) { ml[(r * nq + h * G + g) * params.max_split + s] = vec2<f32>(mx, red[0]); }
    workgroupBarrier();
  }

  // V pass: one lane per head dim, every V row read once for all G heads.
  var o: array<f32, 16>;
  for (var g = 0u; g < G; g++) { o[g] = 0.0; }
  for (var t = 0u; t < nj; t++) {
    let j = j0 + t;
    let vb = pages[prow + j / ps] * pstride + (nkv + h) * ps * HD + (j % ps) * HD;
    let vd = f32(kv[vb + lid]);
    for (var g = 0u; g < G; g++) { o[g] = fma(sc[g * SPLIT + t], vd, o[g]); }
  }
  for (var g = 0u; g < G; g++) {
    opart[((r * nq + h * G + g) * params.max_split + s) * HD + lid] = o[g];
  }
}
