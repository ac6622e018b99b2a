// Decode attention over the paged KV cache, split along the keys (flash-decoding), first half:
//   for row r, kv head h, split s: keys j in [s·SPLIT, min((s+1)·SPLIT, pos_r + 1)), the G = nq/nkv query heads
//   of h (GQA: each K/V row is read once for all G heads):
//     m = max_j q·k_j·scale,  l = Σ_j e^(q·k_j·scale − m),  o = Σ_j e^(q·k_j·scale − m) · v_j
//   written unnormalised; attention_combine.wgsl merges the splits in order.
// Bindings:  rows  (R)                      step rows: pos, slot
//            q     (R, nq·hd) act
//            pages (slots, max_pages) u32
//            kv    (pages, 2, nkv, ps, hd) act, read 8 values per load
//            opart (R, nq, max_split, hd) f32
//            ml    (R, nq, max_split) vec2<f32>  (m, l)
// Grid: (n rows, nkv, splits); splits = ceil(longest KV / SPLIT), splits past a row's length exit at once.
// Workgroup: WG lanes = KG key groups × L lanes, L = HD/8: a group reads one key row (16 B per lane,
// coalesced) and owns 8 dims per lane. Scores are reduced across the L lanes (subgroup shuffles when
// LANE_SUBGROUP), V rows are accumulated per group and the KG partial outputs summed in group order.
#include "lib/common.wgsl"

override HD: u32 = 128;      // head dim
const G: u32 = {{G}}u;       // query heads per kv head (a define: it sizes per-lane arrays)
override SPLIT: u32 = 256;   // keys per split
override WG: u32 = 128;
override L: u32 = HD / 8u;   // lanes per key row
override KG: u32 = WG / L;   // key rows in flight

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
#ifdef F16
@group(0) @binding(4) var<storage, read> kv: array<vec4<u32>>;
#else
@group(0) @binding(4) var<storage, read> kv: array<vec4<f32>>;
#endif
@group(0) @binding(5) var<storage, read_write> opart: array<f32>;
@group(0) @binding(6) var<storage, read_write> ml: array<vec2<f32>>;

var<workgroup> sc: array<f32, G * SPLIT>;
var<workgroup> red: array<f32, WG>;
var<workgroup> oacc: array<f32, G * HD>;
#ifndef LANE_SUBGROUP
var<workgroup> part: array<f32, WG * G>;
#endif

// 8 values of the cache starting at element e (a multiple of 8).
fn kv8(e: u32) -> array<vec4<f32>, 2> {
#ifdef F16
  let v = kv[e / 8u];
  return array<vec4<f32>, 2>(vec4<f32>(unpack2x16float(v.x), unpack2x16float(v.y)),
                             vec4<f32>(unpack2x16float(v.z), unpack2x16float(v.w)));
#else
  return array<vec4<f32>, 2>(kv[e / 4u], kv[e / 4u + 1u]);
#endif
}

fn reduce_max(v: f32, lid: u32) -> f32 {
  red[lid] = v;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s = s >> 1u) {
    if (lid < s) { red[lid] = max(red[lid], red[lid + s]); }
    workgroupBarrier();
  }
  let r = red[0];
  workgroupBarrier();
  return r;
}
fn reduce_sum(v: f32, lid: u32) -> f32 {
  red[lid] = v;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s = s >> 1u) {
    if (lid < s) { red[lid] = red[lid] + red[lid + s]; }
    workgroupBarrier();
  }
  let r = red[0];
  workgroupBarrier();
  return r;
}

@compute @workgroup_size(WG)
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
  let grp = lid / L;
  let lane = lid % L;
  let d0 = lane * 8u;

  // This lane's 8 dims of every query head, pre-scaled.
  var qv: array<array<vec4<f32>, 2>, G>;
  for (var g = 0u; g < G; g++) {
    let qb = r * nq * HD + (h * G + g) * HD + d0;
    for (var c = 0u; c < 2u; c++) {
      qv[g][c] = vec4<f32>(f32(q[qb + 4u * c]), f32(q[qb + 4u * c + 1u]), f32(q[qb + 4u * c + 2u]),
                           f32(q[qb + 4u * c + 3u])) * params.scale;
    }
  }

  // Scores: group grp takes keys grp, grp + KG, ...; its L lanes each dot 8 dims, then sum.
  for (var t0 = 0u; t0 < nj; t0 += KG) {
    let t = t0 + grp;
    let j = j0 + min(t, nj - 1u);
    let kb = pages[prow + j / ps] * pstride + h * ps * HD + (j % ps) * HD + d0;
    let k = kv8(kb);
    for (var g = 0u; g < G; g++) {
      var p = dot(qv[g][0], k[0]) + dot(qv[g][1], k[1]);
#ifdef LANE_SUBGROUP
      for (var mask = L / 2u; mask > 0u; mask = mask >> 1u) { p += subgroupShuffleXor(p, mask); }
      if (lane == 0u && t < nj) { sc[g * SPLIT + t] = p; }
#else
      part[lid * G + g] = p;
#endif
    }
#ifndef LANE_SUBGROUP
    workgroupBarrier();
    if (lane == 0u && t < nj) {
      for (var g = 0u; g < G; g++) {
        var p = 0.0;
        for (var i = 0u; i < L; i++) { p += part[(lid + i) * G + g]; }
        sc[g * SPLIT + t] = p;
      }
    }
    workgroupBarrier();
#endif
  }
  workgroupBarrier();

  // Per head: max and exponentials (fixed-order reductions).
  for (var g = 0u; g < G; g++) {
    var mx = -3.0e38;
    for (var t = lid; t < nj; t += WG) { mx = max(mx, sc[g * SPLIT + t]); }
    mx = reduce_max(mx, lid);
    var sum = 0.0;
    for (var t = lid; t < nj; t += WG) {
      let p = exp(sc[g * SPLIT + t] - mx);
      sc[g * SPLIT + t] = p;
      sum += p;
    }
    sum = reduce_sum(sum, lid);
    if (lid == 0u) { ml[(r * nq + h * G + g) * params.max_split + s] = vec2<f32>(mx, sum); }
  }
  for (var i = lid; i < G * HD; i += WG) { oacc[i] = 0.0; }
  workgroupBarrier();

  // V: group grp accumulates keys grp, grp + KG, ... over its lanes' 8 dims, for all G heads.
  var o: array<array<vec4<f32>, 2>, G>;
  for (var g = 0u; g < G; g++) { o[g][0] = vec4<f32>(0.0); o[g][1] = vec4<f32>(0.0); }
  for (var t = grp; t < nj; t += KG) {
    let j = j0 + t;
    let vb = pages[prow + j / ps] * pstride + (nkv + h) * ps * HD + (j % ps) * HD + d0;
    let v = kv8(vb);
    for (var g = 0u; g < G; g++) {
      let p = sc[g * SPLIT + t];
      o[g][0] = fma(vec4<f32>(p), v[0], o[g][0]);
      o[g][1] = fma(vec4<f32>(p), v[1], o[g][1]);
    }
  }
  // Sum the KG partial outputs in group order (deterministic).
  for (var gi = 0u; gi < KG; gi++) {
    if (grp == gi) {
      for (var g = 0u; g < G; g++) {
        for (var c = 0u; c < 8u; c++) { oacc[g * HD + d0 + c] += o[g][c / 4u][c % 4u]; }
      }
    }
    workgroupBarrier();
  }
  for (var i = lid; i < G * HD; i += WG) {
    let g = i / HD;
    let d = i % HD;
    opart[((r * nq + h * G + g) * params.max_split + s) * HD + d] = oacc[i];
  }
}
