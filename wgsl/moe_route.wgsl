// MoE router: per row, softmax over the E expert logits (f32, max subtracted), then the k largest
// probabilities in descending order (ties: the lower expert index first).
//   ids[r, j] = j-th chosen expert;  weights[r, j] = its probability, / Σ_j of them when renorm ≠ 0
//   (HF norm_topk_prob)                                        rows r = row0 .. row0 + R − 1
// Bindings:  logits (rows, E) f32;  ids (rows, k) u32;  weights (rows, k) f32
// Grid: R workgroups (folded 2-D), one per row, WG lanes: lane l holds experts l, l + WG, ... Max and sum
// go through the fixed-order workgroup tree (lib/reduce.wgsl); each of the k picks is an arg-max tree over
// (probability, index). SUBGROUP_ROUTE (WG = the fixed subgroup size): the lane keeps its experts in
// registers, and max, sum and each pick are subgroup operations, no barriers (a decode step's router was
// k + 2 barrier trees). Nothing depends on other rows (batch invariance).
#include "lib/common.wgsl"

override WG: u32 = 64;
#include "lib/reduce.wgsl"

const MAX_E: u32 = 512u;
const MAX_K: u32 = 16u;

struct Params {
  row0: u32,    // first row
  E: u32,       // experts (≤ MAX_E)
  k: u32,       // experts per row (≤ MAX_K, ≤ E)
  renorm: u32,  // 1: weights divided by their sum
}
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> logits: array<f32>;
@group(0) @binding(2) var<storage, read_write> ids: array<u32>;
@group(0) @binding(3) var<storage, read_write> weights: array<f32>;

#ifdef SUBGROUP_ROUTE
const PER_LANE: u32 = {{PER_LANE}}u;   // ceil(E / WG): experts a lane holds, in registers (constant indices)

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let r = params.row0 + wg_linear(wid, nwg);
  let E = params.E;
  let lb = r * E;
  var p: array<f32, PER_LANE>;
  var mx = logits[lb];
  for (var i = 0u; i < PER_LANE; i++) {
    let e = lid + i * WG;
    p[i] = select(-3.0e38, logits[lb + min(e, E - 1u)], e < E);
    mx = max(mx, p[i]);
  }
  mx = subgroupMax(mx);
  var s = 0.0;
  for (var i = 0u; i < PER_LANE; i++) {
    p[i] = select(0.0, exp(p[i] - mx), lid + i * WG < E);
    s += p[i];
  }
  s = subgroupAdd(s);
  // Out-of-range slots become −2, below every probability and below the −1 of a chosen expert.
  for (var i = 0u; i < PER_LANE; i++) { p[i] = select(-2.0, p[i] / s, lid + i * WG < E); }
  var chosen: array<f32, MAX_K>;
  for (var j = 0u; j < params.k; j++) {
    var v = -3.0;
    var at = 0u;
    for (var i = 0u; i < PER_LANE; i++) {
      if (p[i] > v) {   // strict: the lane's lower index wins a tie
        v = p[i];
        at = i;
      }
    }
    let m = subgroupMax(v);
    let win = subgroupMin(select(0xffffffffu, lid + at * WG, v == m));
    for (var i = 0u; i < PER_LANE; i++) {
      if (lid + i * WG == win) { p[i] = -1.0; }
    }
    chosen[j] = m;
    if (lid == 0u) { ids[r * params.k + j] = win; }
  }
  if (lid == 0u) {
    var tot = 0.0;
    for (var j = 0u; j < params.k; j++) { tot += chosen[j]; }
    for (var j = 0u; j < params.k; j++) {
      weights[r * params.k + j] = select(chosen[j], chosen[j] / tot, params.renorm != 0u);
    }
  }
}
#else
var<workgroup> prob: array<f32, MAX_E>;
var<workgroup> best_v: array<f32, WG>;
var<workgroup> best_i: array<u32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let r = params.row0 + wg_linear(wid, nwg);
  let E = params.E;
  let lb = r * E;
  var mx = logits[lb];
  for (var e = lid; e < E; e += WG) { mx = max(mx, logits[lb + e]); }
  mx = wg_max(mx, lid);
  var s = 0.0;
  for (var e = lid; e < E; e += WG) {
    let v = exp(logits[lb + e] - mx);
    prob[e] = v;
    s += v;
  }
  s = wg_sum(s, lid);
  for (var e = lid; e < E; e += WG) { prob[e] = prob[e] / s; }
  workgroupBarrier();
  // k arg-max rounds; a chosen expert's probability becomes −1 (all probabilities are ≥ 0).
  var chosen: array<f32, MAX_K>;
  for (var j = 0u; j < params.k; j++) {
    var v = -2.0;
    var i = E;
    for (var e = lid; e < E; e += WG) {
      let pe = prob[e];
      if (pe > v) {   // strict: the lane's lower index wins a tie
        v = pe;
        i = e;
      }
    }
    best_v[lid] = v;
    best_i[lid] = i;
    workgroupBarrier();
    for (var h = WG / 2u; h > 0u; h = h >> 1u) {
      if (lid < h) {
        let ov = best_v[lid + h];
        let oi = best_i[lid + h];
        if (ov > best_v[lid] || (ov == best_v[lid] && oi < best_i[lid])) {
          best_v[lid] = ov;
          best_i[lid] = oi;
        }
      }
      workgroupBarrier();
    }
    if (lid == 0u) {
      let win = best_i[0];
      chosen[j] = best_v[0];
      ids[r * params.k + j] = win;
      prob[win] = -1.0;
    }
    workgroupBarrier();
  }
  if (lid == 0u) {
    var tot = 0.0;
    for (var j = 0u; j < params.k; j++) { tot += chosen[j]; }
    for (var j = 0u; j < params.k; j++) {
      weights[r * params.k + j] = select(chosen[j], chosen[j] / tot, params.renorm != 0u);
    }
  }
}
#endif
