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
override KS: u32 = HD + 1u;  // padded K/V row stride in workgroup memory (fewer bank conflicts)

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

var<workgroup> qs: array<act, QV * HD>;
var<workgroup> ks: array<act, BK * KS>;
var<workgroup> vs: array<act, BK * KS>;
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

  for (var e = lid; e < QV * HD; e += WG) {
    let v = e / HD;
    let d = e % HD;
    let i = min(v / G, nqb - 1u);
    let g = v % G;
    qs[e] = act(f32(q[(params.row0 + i0 + i) * nq * HD + (h * G + g) * HD + d]) * params.scale);
  }
  var m = -3.0e38;
  var l = 0.0;
  var o: array<f32, OPL>;
  for (var k = 0u; k < OPL; k++) { o[k] = 0.0; }

  for (var kt = 0u; kt < kmax; kt += BK) {
    let nk = min(BK, kmax - kt);
    for (var e = lid; e < BK * HD; e += WG) {
      let t = e / HD;
      let d = e % HD;
      let j = kt + min(t, nk - 1u);
      let base = pages[prow + j / ps] * pstride + h * ps * HD + (j % ps) * HD + d;
      ks[t * KS + d] = kv[base];
      vs[t * KS + d] = kv[base + nkv * ps * HD];
    }
    workgroupBarrier();
    for (var e = lid; e < QV * BK; e += WG) {
      let v = e / BK;
      let t = e % BK;
      let i = v / G;
      var sv = -3.0e38;
      if (i < nqb && t < nk && kt + t <= rows[params.row0 + i0 + i].pos) {
        var acc = 0.0;
        for (var d = 0u; d < HD; d++) { acc = fma(f32(qs[v * HD + d]), f32(ks[t * KS + d]), acc); }
        sv = acc;
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
        for (var t = 0u; t < nk; t++) { acc = fma(ss[v * BK + t], f32(vs[t * KS + d]), acc); }
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
