// Residual add: y[i] += x[i] for i < n; y is the f32 residual stream, x an activation (act).
// (Most adds are fused into the matmul epilogue; this is the stand-alone op.)
// Bindings:  x (n) act;  y (n) f32
// Grid: ceil(n / WG) workgroups, folded 2-D.
#include "lib/common.wgsl"

override WG: u32 = 256;

struct Params {
  n: u32,  // elements
}
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> x: array<act>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = wg_linear(wid, nwg) * WG + lid;
  if (i >= params.n) { return; }
  y[i] = y[i] + f32(x[i]);
}
