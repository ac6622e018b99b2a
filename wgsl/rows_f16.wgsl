// Matmul input rows as f16, for the matrix-unit matmul (matmul_sgmat.wgsl):
//   out[m, k] = f16(clamp(x[row0 + m, k], −65504, 65504))      m < M, k < K (a multiple of 8)
// Values past f16's range saturate instead of becoming ±inf (and NaN in the products): rare activation
// outliers then cost accuracy in their row, not the whole output.
// One lane converts 8 values into one vec4 of packed halves. Grid: grid1d(ceil(M·K / 8 / WG)); WG lanes.
#include "lib/common.wgsl"

override WG: u32 = 256;

struct Params {
  M: u32,     // rows
  K: u32,     // values per row
  row0: u32,  // first row of x (rows)
}
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;          // matmul inputs are f32
@group(0) @binding(2) var<storage, read_write> out: array<vec4<u32>>;  // (M, K / 8)

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) t: u32) {
  let i = wg_linear(wid, nwg) * WG + t;
  if (i >= params.M * (params.K / 8u)) { return; }
  let src = 2u * i + params.row0 * (params.K / 4u);
  let a = clamp(x[src], vec4<f32>(-65504.0), vec4<f32>(65504.0));
  let b = clamp(x[src + 1u], vec4<f32>(-65504.0), vec4<f32>(65504.0));
  out[i] = vec4<u32>(pack2x16float(a.xy), pack2x16float(a.zw), pack2x16float(b.xy), pack2x16float(b.zw));
}
