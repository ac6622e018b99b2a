// Output gate of gated attention (Qwen3-Next): y[r, i] ·= sigmoid(gate[r, i]), per element of the heads'
// concatenated attention output, before o_proj.
// Bindings:  gate (rows, W) act (the gate projection's logits);  y (rows, W) f32, updated in place
//   for rows row0 .. row0+R
// Grid: ceil(R·W / WG) workgroups, folded 2-D.
#include "lib/common.wgsl"

override WG: u32 = 256;

struct Params {
  R: u32,  // rows
  W: u32,  // row width (elements)
  row0: u32,  // first row
}
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> gate: array<act>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = wg_linear(wid, nwg) * WG + lid;
  if (i >= params.R * params.W) { return; }
  let at = params.row0 * params.W + i;
  y[at] = y[at] / (1.0 + exp(-f32(gate[at])));
}
