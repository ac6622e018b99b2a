// SwiGLU gate: h[r, i] = silu(gu[r, i]) · gu[r, I + i], the gate and up projections stored side by side
// (one fused matmul writes [gate | up]).
// Bindings:  gu (R, 2I) act;  h (R, I) f32 (a matmul input)
//   for rows row0 .. row0+R (row0 > 0: a step's prefill rows; decode rows fuse this into their matmul)
// Grid: ceil(R·I / WG) workgroups, folded 2-D.
#include "lib/common.wgsl"

override WG: u32 = 256;

struct Params {
  R: u32,  // rows
  I: u32,  // intermediate size (elements)
  row0: u32,  // first row
}
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> gu: array<act>;
@group(0) @binding(2) var<storage, read_write> h: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = wg_linear(wid, nwg) * WG + lid;
  if (i >= params.R * params.I) { return; }
  let rr = i / params.I;
  let c = i - rr * params.I;
  let r = params.row0 + rr;
  let g = f32(gu[r * 2u * params.I + c]);
  let u = f32(gu[r * 2u * params.I + params.I + c]);
  h[r * params.I + c] = silu(g) * u;
}
