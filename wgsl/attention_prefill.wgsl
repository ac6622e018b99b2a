// Causal attention for a prefill segment (rows row0 .. row0+S−1 of one sequence, consecutive positions),
// tiled with an online softmax so memory does not grow with the prompt (flash attention):
//   out[i, qh] = Σ_{j ≤ pos_i} softmax_j(q_i,qh · k_j · scale) · v_j,   K/V read through the page table
// (the segment's own K/V were written by rope.wgsl before this runs).
// Bindings:  rows  (R) step rows: pos, slot
//            q     (R, nq·hd) act
//            pages (slots, max_pages) u32;  kv (pages, 2, nkv, ps, hd) act
//            out   (R, nq·hd) f32 (a matmul input)
// Grid: (ceil(S / BQ), nkv). A workgroup holds QV = WG/L query vectors (L = hd/8 lanes each, 8 dims per
// lane): BQ positions × the G query heads of one kv head. It walks key tiles of BK from 0 to its last
// position: the tile is loaded once into workgroup memory as f32 (shared by all QV vectors), then each lane
// group runs an online softmax over the tile's keys (dot across its L lanes by subgroup shuffles). Per-lane
// state is a few named vec4s, never arrays (those end up in local memory).
#include "lib/common.wgsl"

override HD: u32 = 128;
override G: u32 = 1;
override BK: u32 = 32;       // keys per tile
override WG: u32 = 256;
override L: u32 = HD / 8u;   // lanes per query vector
override QV: u32 = WG / L;   // query vectors per workgroup
override BQ: u32 = 1;        // positions per workgroup (BQ·G ≤ QV)
override H4: u32 = HD / 4u;  // vec4s per head row

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

var<workgroup> ks: array<vec4<f32>, BK * H4>;
var<workgroup> vs: array<vec4<f32>, BK * H4>;
#ifndef LANE_SUBGROUP
var<workgroup> sm_dot: array<f32, WG>;
#endif

fn ld4(e: u32) -> vec4<f32> {
  return vec4<f32>(f32(kv[e]), f32(kv[e + 1u]), f32(kv[e + 2u]), f32(kv[e + 3u]));
}

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

  // This lane group's query vector: position i, head g (groups past BQ·G are idle but keep step).
  let grp = lid / L;
  let lane = lid % L;
  let d0 = lane * 8u;
  let i = min(grp / G, nqb - 1u);
  let g = grp % G;
  let live = grp < nqb * G;
  let row = params.row0 + i0 + i;
  let pos = rows[row].pos;
  let qo = row * nq * HD + (h * G + g) * HD + d0;
  let qa = vec4<f32>(f32(q[qo]), f32(q[qo + 1u]), f32(q[qo + 2u]), f32(q[qo + 3u])) * params.scale;
  let qb = vec4<f32>(f32(q[qo + 4u]), f32(q[qo + 5u]), f32(q[qo + 6u]), f32(q[qo + 7u])) * params.scale;

  var m = -3.0e38;
  var l = 0.0;
  var oa = vec4<f32>(0.0);
  var ob = vec4<f32>(0.0);
  for (var kt = 0u; kt < kmax; kt += BK) {
    let nk = min(BK, kmax - kt);
    for (var e = lid; e < BK * H4; e += WG) {
      let t = e / H4;
      let d4 = e % H4;
      let j = kt + min(t, nk - 1u);
      let base = pages[prow + j / ps] * pstride + h * ps * HD + (j % ps) * HD + d4 * 4u;
      ks[e] = ld4(base);
      vs[e] = ld4(base + nkv * ps * HD);
    }
    workgroupBarrier();
    for (var t = 0u; t < nk; t++) {
      let kb = t * H4 + lane * 2u;
      var d = dot(qa, ks[kb]) + dot(qb, ks[kb + 1u]);
#ifdef LANE_SUBGROUP
      for (var mask = L / 2u; mask > 0u; mask = mask >> 1u) { d += subgroupShuffleXor(d, mask); }
#else
      sm_dot[lid] = d;
      workgroupBarrier();
      d = 0.0;
      for (var x = 0u; x < L; x++) { d += sm_dot[grp * L + x]; }
      workgroupBarrier();
#endif
      if (kt + t <= pos) {
        let mn = max(m, d);
        let c = exp(m - mn);
        let p = exp(d - mn);
        l = l * c + p;
        oa = oa * c + p * vs[kb];
        ob = ob * c + p * vs[kb + 1u];
        m = mn;
      }
    }
    workgroupBarrier();
  }
  if (live) {
    let o = row * nq * HD + (h * G + g) * HD + d0;
    for (var c = 0u; c < 4u; c++) {
      out[o + c] = oa[c] / l;
      out[o + 4u + c] = ob[c] / l;
    }
  }
}
