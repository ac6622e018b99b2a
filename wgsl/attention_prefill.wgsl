// Causal attention for a prefill segment (rows row0 .. row0+S−1 of one sequence, consecutive positions),
// tiled with an online softmax so memory does not grow with the prompt (flash attention):
//   out[i, qh] = Σ_{j ≤ pos_i} softmax_j(q_i,qh · k_j · scale) · v_j,   K/V read through the page table
// (the segment's own K/V were written by rope.wgsl before this runs).
// Bindings:  rows  (R) step rows: pos, slot
//            q     (R, nq·hd) act
//            pages (slots, max_pages) u32;  kv (pages, 2, nkv, ps, hd) act
//            out   (R, nq·hd) f32 (a matmul input)
// Grid: (ceil(S / BQ), nkv). A workgroup takes BQ query positions × the G heads of one kv head (QV = BQ·G
// query vectors) and walks key tiles of BK from 0 to its last position; each K/V tile is read once for all
// QV vectors. Lane v < QV keeps row v's running max and sum; the QV·hd outputs are spread OPL per lane.
#include "lib/common.wgsl"

override HD: u32 = 128;
override G: u32 = 1;
override BQ: u32 = 16;
override BK: u32 = 32;
override WG: u32 = 128;
const OPL: u32 = {{OPL}}u;   // ceil(BQ·G·HD / WG), outputs per lane
override QV: u32 = BQ * G;
override H4: u32 = HD / 4u;  // vec4s per head row
override KS: u32 = H4 + 1u;  // padded K/V row stride in vec4s (fewer bank conflicts)

struct Params {
  row0: u32,       // first step row of the segment
  S: u32,          // rows in the segment
  nq: u32,         // query heads
  nkv: u32,        // kv heads
  ps: u32,         // page size (tokens)
  max_pages: u32,  // page-table row length
  scale: f32,      // softmax scale
}
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> rows: array<Row>;
@group(0) @binding(2) var<storage, read> q: array<act>;
@group(0) @binding(3) var<storage, read> pages: array<u32>;
@group(0) @binding(4) var<storage, read> kv: array<act>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>;

// Tiles in f32 (converted once on load): the inner loops are vec4 dot products, no per-FMA conversions.
var<workgroup> qs: array<vec4<f32>, QV * H4>;
var<workgroup> ks: array<vec4<f32>, BK * KS>;
var<workgroup> vs: array<vec4<f32>, BK * KS>;
var<workgroup> ss: array<f32, QV * BK>;
var<workgroup> alpha: array<f32, QV>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let h = wid.y;
  let i0 = wid.x * BQ;
  let nqb = min(BQ, params.S - i0);
  let nq = params.nq;
  let nkv = params.nkv;
  let ps = params.ps;
  let pstride = 2u * nkv * ps * HD;
  let first = rows[params.row0 + i0];
  let prow = first.slot * params.max_pages;
  let kmax = rows[params.row0 + i0 + nqb - 1u].pos + 1u;

  for (var e = lid; e < QV * H4; e += WG) {
    let v = e / H4;
    let d = (e % H4) * 4u;
    let i = min(v / G, nqb - 1u);
    let g = v % G;
    let o = (params.row0 + i0 + i) * nq * HD + (h * G + g) * HD + d;
    qs[e] = vec4<f32>(f32(q[o]), f32(q[o + 1u]), f32(q[o + 2u]), f32(q[o + 3u])) * params.scale;
  }
  var m = -3.0e38;
  var l = 0.0;
  var o: array<f32, OPL>;
  for (var k = 0u; k < OPL; k++) { o[k] = 0.0; }

  for (var kt = 0u; kt < kmax; kt += BK) {
    let nk = min(BK, kmax - kt);
    for (var e = lid; e < BK * H4; e += WG) {
      let t = e / H4;
      let d4 = e % H4;
      let j = kt + min(t, nk - 1u);
      let base = pages[prow + j / ps] * pstride + h * ps * HD + (j % ps) * HD + d4 * 4u;
      let vb = base + nkv * ps * HD;
      ks[t * KS + d4] = vec4<f32>(f32(kv[base]), f32(kv[base + 1u]), f32(kv[base + 2u]), f32(kv[base + 3u]));
      vs[t * KS + d4] = vec4<f32>(f32(kv[vb]), f32(kv[vb + 1u]), f32(kv[vb + 2u]), f32(kv[vb + 3u]));
    }
    workgroupBarrier();
    for (var e = lid; e < QV * BK; e += WG) {
      let v = e / BK;
      let t = e % BK;
      let i = v / G;
      var sv = -3.0e38;
      if (i < nqb && t < nk && kt + t <= rows[params.row0 + i0 + i].pos) {
        var acc = vec4<f32>(0.0);
        for (var d4 = 0u; d4 < H4; d4++) { acc = fma(qs[v * H4 + d4], ks[t * KS + d4], acc); }
        sv = acc.x + acc.y + acc.z + acc.w;
      }
      ss[e] = sv;
    }
    workgroupBarrier();
    if (lid < QV) {
      var mt = m;
      for (var t = 0u; t < nk; t++) { mt = max(mt, ss[lid * BK + t]); }
      let a = exp(m - mt);
      var sum = 0.0;
      for (var t = 0u; t < BK; t++) {
        let sv = ss[lid * BK + t];
        let p = select(exp(sv - mt), 0.0, sv <= -1.0e38 || t >= nk);
        ss[lid * BK + t] = p;
        sum += p;
      }
      l = fma(l, a, sum);
      m = mt;
      alpha[lid] = a;
    }
    workgroupBarrier();
    for (var k = 0u; k < OPL; k++) {
      let oi = lid + WG * k;
      if (oi < QV * HD) {
        let v = oi / HD;
        let d = oi % HD;
        var acc = o[k] * alpha[v];
        for (var t = 0u; t < nk; t++) { acc = fma(ss[v * BK + t], vs[t * KS + d / 4u][d % 4u], acc); }
        o[k] = acc;
      }
    }
    workgroupBarrier();
  }
  if (lid < QV) { alpha[lid] = l; }
  workgroupBarrier();
  for (var k = 0u; k < OPL; k++) {
    let oi = lid + WG * k;
    if (oi < QV * HD) {
      let v = oi / HD;
      let d = oi % HD;
      let i = v / G;
      let g = v % G;
      if (i < nqb) {
        out[(params.row0 + i0 + i) * nq * HD + (h * G + g) * HD + d] = o[k] / alpha[v];
      }
    }
  }
}
