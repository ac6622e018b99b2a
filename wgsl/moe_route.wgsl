// MoE router from logits: per row, softmax over the E expert logits (f32, max subtracted), then the k
// largest probabilities in descending order (ties: the lower expert index first).
//   ids[r, j] = j-th chosen expert;  weights[r, j] = its probability, / Σ_j of them when renorm ≠ 0
//   (HF norm_topk_prob)                                        rows r = row0 .. row0 + R − 1
// Bindings:  logits (rows, E) f32;  ids (rows, k) u32;  weights (rows, k) f32
// Grid: R workgroups (folded 2-D), one per row, of WG lanes (a power of two, E ≤ 4·WG): lib/topk.wgsl picks
// k, by one subgroup alone under TOPK_ONE_SUBGROUP (WG = SGS), else from the row's logits in workgroup memory
// (by subgroup operations under TOPK_SUBGROUPS). Nothing depends on other rows (batch invariance); with the
// same defines, moe_vec_x8.wgsl's ROUTE gives a decode row the same ids and weights.
#include "lib/common.wgsl"

override WG: u32 = 128;
override SGS: u32 = 32;   // subgroup size under TOPK_SUBGROUPS (fixed on the devices that define it)
#ifndef TOPK_SUBGROUPS
#include "lib/reduce.wgsl"
#endif

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

#include "lib/topk.wgsl"

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let r = params.row0 + wg_linear(wid, nwg);
#ifndef TOPK_ONE_SUBGROUP
  for (var e = lid; e < params.E; e += WG) { tk_p[e] = logits[r * params.E + e]; }
  workgroupBarrier();
#endif
  _ = route_row(r, params.E, params.k, params.renorm != 0u, lid, true, 0u);
}
