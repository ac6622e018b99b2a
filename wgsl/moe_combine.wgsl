// MoE combine: each row's routed expert outputs, weighted, added to the residual:
//   x[r, n] += Σ_{j < k, in order} weights[r, j] · y[r·k + j, n]         rows r = row0 .. row0 + M − 1, n < H
//              (+ sigmoid(gate[r]) · sy[r, n] under SHARED: Qwen3-Next's gated shared expert)
// Bindings:  y (rows·k, H) f32;  weights (rows, k) f32;  sy (rows, H) f32, gate (rows) f32 logits (SHARED);
//            x (rows, H) f32, the residual (read and written)
// Grid: ceil(M·H / WG) workgroups, folded 2-D; one lane per element, its sum in a fixed order.
#include "lib/common.wgsl"

override WG: u32 = 256;

struct Params {
  M: u32,     // rows
  row0: u32,  // first row
  k: u32,     // experts per row
  H: u32,     // hidden size (elements)
}
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> y: array<f32>;
@group(0) @binding(2) var<storage, read> weights: array<f32>;
#ifdef SHARED
@group(0) @binding(3) var<storage, read> sy: array<f32>;
@group(0) @binding(4) var<storage, read> gate: array<f32>;
#endif
@group(0) @binding(5) var<storage, read_write> x: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = wg_linear(wid, nwg) * WG + lid;
  let H = params.H;
  if (i >= params.M * H) { return; }
  let r = params.row0 + i / H;
  let n = i % H;
  let k = params.k;
  // The shared term first and as a product with the gate's reciprocal, as moe_vec's fused combine takes it
  // (the same bits: a quotient may be lowered differently where the gate is uniform).
#ifdef SHARED
  let s = sy[r * H + n] * (1.0 / (1.0 + exp(-gate[r])));
#endif
  var acc = 0.0;
  for (var j = 0u; j < k; j++) { acc += weights[r * k + j] * y[(r * k + j) * H + n]; }
#ifdef SHARED
  acc += s;
#endif
  x[r * H + n] = x[r * H + n] + acc;
}
