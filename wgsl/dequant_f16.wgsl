// A quantized weight as f16, for the matrix-unit matmul (matmul_sgmat.wgsl):
//   out[n, k] = f16(scale[n, k / GS]·q[n, k] + bias[n, k / GS])      n < N, k < K
// W is MLX affine: BITS (4 or 8) per value packed little-endian into u32 rows of K·BITS/32 words; scales and
// biases 16-bit (SCALE_F16, else bf16), two per u32. One lane turns 8 values (one group's) into one vec4
// of packed halves. Grid: grid1d(ceil(N·K / 8 / WG)) (index x + y·nx); WG lanes.
#include "lib/common.wgsl"

override WG: u32 = 256;
override BITS: u32 = 4;
override GS: u32 = 64;

struct Params {
  N: u32,  // rows of W (output columns of the matmul)
  K: u32,  // values per row, a multiple of 32
}
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> w: array<u32>;
@group(0) @binding(2) var<storage, read> scales: array<u32>;
@group(0) @binding(3) var<storage, read> biases: array<u32>;
@group(0) @binding(4) var<storage, read_write> out: array<vec4<u32>>;   // (N, K / 8): 8 halves each

#include "lib/dequant_f16.wgsl"

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) t: u32) {
  let i = wg_linear(wid, nwg) * WG + t;   // 8-value unit: row i / (K / 8), values 8·(i % (K / 8)) + 0..7
  let per_row = params.K / 8u;
  if (i >= params.N * per_row) { return; }
  let n = i / per_row;
  let k = (i % per_row) * 8u;
  let g = n * (params.K / GS) + k / GS;
  let s = half_at(scales[g >> 1u], g);
  let b = half_at(biases[g >> 1u], g);
  if (BITS == 4u) {
    out[i] = unit_halves(w[i], 0u, s, b);
  } else {
    out[i] = unit_halves(w[2u * i], w[2u * i + 1u], s, b);
  }
}
