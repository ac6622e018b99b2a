// SwiGLU gate: h[r, i] = silu(gu[r, i]) · gu[r, I + i], the gate and up projections stored side by side
// (one fused matmul writes [gate | up]). GELU_TANH (Gemma's gelu_pytorch_tanh): h = gelu_tanh(gate) · up.
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

#ifdef GELU_TANH
// gelu_tanh(g) = 0.5·g·(1 + tanh(z)), z = √(2/π)·(g + 0.044715·g³), taken as g / (1 + e^(−2z)) (the same
// function): no tanh to overflow, and no cancellation in 1 + tanh(z) for negative gates. z is clamped to
// ±40 so that e^(−2z) stays finite (below e^80); past it the result is within 1e-34·|g| of 0 or g.
fn gelu_tanh(g: f32) -> f32 {
  let z = clamp(0.7978845608 * fma(0.044715 * g, g * g, g), -40.0, 40.0);
  return g / (1.0 + exp(-2.0 * z));
}
#endif

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
#ifdef GELU_TANH
  h[r * params.I + c] = gelu_tanh(g) * u;
#else
  h[r * params.I + c] = silu(g) * u;
#endif
}
