// Second half of a split-K matmul (matmul_tiled_x8.wgsl under SPLITK): adds the splits' partials in order
// and applies the matmul epilogue:
//   y[row0 + m, n_off + n] (=|+=) Σ_{z < splits} part[z, m, n] (+ bias[n])      m < M, n < N
// The sum runs z = 0, 1, ... for every row whatever M is (batch invariance).
// Bindings:  part (splits, M, N) f32;  bias (N) f32 (BIAS);  y (rows, ldy) f32 (OUT_F32, ADD) or act
// Grid: (ceil(N / 256), M); one lane per output.
#include "lib/common.wgsl"

struct Params {
  M: u32,       // rows
  N: u32,       // output columns of this weight buffer
  row0: u32,    // first row of y written
  ldy: u32,     // row stride of y (elements)
  n_off: u32,   // column of y where this weight's output starts
  splits: u32,  // partials per output
}
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> part: array<f32>;

#include "lib/matmul.wgsl"

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let n = wid.x * 256u + lid;
  let m = wid.y;
  if (n >= params.N) { return; }
  let MN = params.M * params.N;
  var v = part[m * params.N + n];
  for (var z = 1u; z < params.splits; z++) { v += part[z * MN + m * params.N + n]; }
  store(params.row0 + m, n, v);
}
