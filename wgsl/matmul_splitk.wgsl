// Second half of a split-K matmul (matmul_tiled_x8.wgsl under SPLITK, matmul_sgmat.wgsl): adds the splits'
// partials in order and applies the matmul epilogue:
//   y[row0 + m, n_off + n] (=|+=) Σ_{z < splits} part[z·mp + m, n] (+ bias[n])      m < M, n < N
// The sum runs z = 0, 1, ... for every row whatever M is (batch invariance).
// Bindings:  part (splits · mp, ldp) f32 (mp ≥ M, ldp ≥ N: matmul_sgmat's whole tiles);  bias (N) f32
// (BIAS);  y (rows, ldy) f32 (OUT_F32, ADD) or act
// Grid: (ceil(N / 256), M); one lane per output.
#include "lib/common.wgsl"

struct Params {
  M: u32,       // rows
  N: u32,       // output columns of this weight buffer
  row0: u32,    // first row of y written
  ldy: u32,     // row stride of y (elements)
  n_off: u32,   // column of y where this weight's output starts
  splits: u32,  // partials per output
  mp: u32,      // rows of part per split
  ldp: u32,     // row stride of part
}
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> part: array<f32>;

#include "lib/matmul.wgsl"

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let n = wid.x * 256u + lid;
  let m = wid.y;
  if (n >= params.N) { return; }
  let at = m * params.ldp + n;
  let split = params.mp * params.ldp;
  var v = part[at];
  for (var z = 1u; z < params.splits; z++) { v += part[z * split + at]; }
  store(params.row0 + m, n, v);
}
