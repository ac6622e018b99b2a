// Decode attention, second half: merges the per-split partials of attention_decode.wgsl in a fixed order:
//   M = max_s m_s,  L = Σ_s l_s·e^(m_s − M),  out = Σ_s o_s·e^(m_s − M) / L
// Bindings:  rows  (R) step rows (pos gives the number of splits used)
//            opart (R, nq, max_split, hd) f32, read 4 dims per load;  ml (R, nq, max_split) vec2<f32>
//            out   (R, nq·hd) f32 (a matmul input)
// Grid: (n rows, nq). WG lanes = NG groups × HD/4 lanes: group g merges splits g, g+NG, ... online (so a
// long context's splits are read NG at a time, not one after another), then group 0 merges the NG states
// in order. Only 32 workgroups run for a 32-head row: wider ones put more splits' loads in flight.
// WINDOW: splits wholly before the row's sliding window (params.window) wrote nothing and are skipped.
#include "lib/common.wgsl"

override HD: u32 = 128;
override SPLIT: u32 = 256;
override WG: u32 = 128u;
override D4: u32 = HD / 4u;   // lanes per group (4 dims each)
override NG: u32 = WG / D4;   // groups

struct Params {
  row0: u32,       // first step row handled
  nq: u32,         // query heads
  max_split: u32,  // split capacity of opart/ml
  long_len: u32,   // as attention_decode.wgsl's: rows with more keys took 2·SPLIT keys per split
#ifdef WINDOW
  window: u32,     // as attention_decode.wgsl's: sliding window
#endif
}
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> rows: array<Row>;
@group(0) @binding(2) var<storage, read> opart: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> ml: array<vec2<f32>>;
@group(0) @binding(4) var<storage, read_write> out: array<vec4<f32>>;

#include "lib/decode_split.wgsl"

var<workgroup> sm_ml: array<vec2<f32>, WG>;
var<workgroup> sm_o: array<vec4<f32>, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let r = params.row0 + wid.x;
  let qh = wid.y;
  let len = rows[r].pos + 1u;
  let nsplit = (len + split_of(len) - 1u) / split_of(len);
  if (nsplit <= 1u) { return; }                 // attention_decode wrote this row itself
#ifdef WINDOW
  let s0 = (len - min(len, params.window)) / split_of(len);  // the split holding the window's first key
#else
  let s0 = 0u;
#endif
  let base = (r * params.nq + qh) * params.max_split;
  let grp = lid / D4;
  let d4 = lid % D4;
  var m = -3.0e38;
  var l = 0.0;
  var o = vec4<f32>(0.0);
  if (grp < NG) {
    for (var s = s0 + grp; s < nsplit; s += NG) {
      let v = ml[base + s];
      let mn = max(m, v.x);
      let c = exp(m - mn);
      let e = exp(v.x - mn);
      l = l * c + v.y * e;
      o = o * c + opart[(base + s) * D4 + d4] * e;
      m = mn;
    }
  }
  if (d4 == 0u) { sm_ml[grp] = vec2<f32>(m, l); }
  sm_o[lid] = o;
  workgroupBarrier();
  if (grp == 0u) {
    for (var g = 1u; g < NG; g++) {
      let v = sm_ml[g];
      let mn = max(m, v.x);
      let c = exp(m - mn);
      let e = exp(v.x - mn);
      l = l * c + v.y * e;
      o = o * c + sm_o[g * D4 + d4] * e;
      m = mn;
    }
    out[(r * params.nq + qh) * D4 + d4] = o / l;
  }
}
