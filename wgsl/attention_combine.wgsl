// Decode attention, second half: merges the per-split partials of attention_decode.wgsl in split order:
//   M = max_s m_s,  L = Σ_s l_s·e^(m_s − M),  out = Σ_s o_s·e^(m_s − M) / L
// Bindings:  rows  (R) step rows (pos gives the number of splits used)
//            opart (R, nq, max_split, hd) f32;  ml (R, nq, max_split) vec2<f32>
//            out   (R, nq·hd) f32 (a matmul input)
// Grid: (n rows, nq); HD lanes, one per head dim.
#include "lib/common.wgsl"

override HD: u32 = 128;
override SPLIT: u32 = 256;

struct Params {
  row0: u32,       // first step row handled
  nq: u32,         // query heads
  max_split: u32,  // split capacity of opart/ml
}
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> rows: array<Row>;
@group(0) @binding(2) var<storage, read> opart: array<f32>;
@group(0) @binding(3) var<storage, read> ml: array<vec2<f32>>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(HD)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let r = params.row0 + wid.x;
  let qh = wid.y;
  let nsplit = (rows[r].pos + SPLIT) / SPLIT;  // ceil((pos + 1) / SPLIT)
  if (nsplit <= 1u) { return; }                 // attention_decode wrote this row itself
  let base = (r * params.nq + qh) * params.max_split;
  var mx = -3.0e38;
  for (var s = 0u; s < nsplit; s++) { mx = max(mx, ml[base + s].x); }
  var l = 0.0;
  var o = 0.0;
  for (var s = 0u; s < nsplit; s++) {
    let e = exp(ml[base + s].x - mx);
    l = fma(ml[base + s].y, e, l);
    o = fma(opart[(base + s) * HD + lid], e, o);
  }
  out[(r * params.nq + qh) * HD + lid] = o / l;
}
