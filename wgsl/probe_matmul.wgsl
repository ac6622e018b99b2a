// Compute-rate probe (kernel lab, benchmark): C = A·B for square n×n row-major matrices, a plainly good
// tiled matmul whose GFLOP/s is the ceiling compute-bound kernels (matmul_tiled, prefill attention) are
// compared against. HALF: inputs, products and accumulators in f16 (needs F16); otherwise all f32.
// Bindings:  a (n, n) · b (n, n) → c (n, n), read as vec4 along rows
// Grid: (n / 64, n / 64). 256 lanes (16×16) own a 64×64 tile of C, each lane a 4×4 block (4 rows, one
// vec4 of columns); K is walked in tiles of 16 staged in workgroup memory. n must be a multiple of 64.
#include "lib/common.wgsl"

#ifdef HALF
alias T = f16;
alias T4 = vec4<f16>;
#else
alias T = f32;
alias T4 = vec4<f32>;
#endif

const TS: u32 = 64u;  // tile of C
const BK: u32 = 16u;  // k per stage

struct Params {
  n: u32,  // matrix size (multiple of 64)
}
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> a: array<T4>;
@group(0) @binding(2) var<storage, read> b: array<T4>;
@group(0) @binding(3) var<storage, read_write> c: array<T4>;

var<workgroup> as_: array<T4, BK * TS / 4u>;  // [k][m / 4]
var<workgroup> bs: array<T4, BK * TS / 4u>;   // [k][n / 4]

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let n4 = params.n / 4u;
  let m0 = wid.y * TS;
  let c0 = wid.x * TS / 4u;  // first vec4 column of the tile
  let tx = lid % 16u;
  let ty = lid / 16u;
  var acc: array<T4, 4>;
  for (var i = 0u; i < 4u; i++) { acc[i] = T4(0.0); }
  for (var k0 = 0u; k0 < params.n; k0 += BK) {
    // A: 64 rows × 16 k = 256 vec4, stored transposed (k-major); B: 16 k × 64 columns = 256 vec4.
    let r = lid / 4u;
    let kq = lid % 4u;
    let av = a[(m0 + r) * n4 + k0 / 4u + kq];
    for (var e = 0u; e < 4u; e++) { as_[(4u * kq + e) * 16u + r / 4u][r % 4u] = av[e]; }
    bs[(lid / 16u) * 16u + lid % 16u] = b[(k0 + lid / 16u) * n4 + c0 + lid % 16u];
    workgroupBarrier();
    for (var kk = 0u; kk < BK; kk++) {
      let am = as_[kk * 16u + ty];
      let bn = bs[kk * 16u + tx];
      acc[0] = fma(T4(am.x), bn, acc[0]);
      acc[1] = fma(T4(am.y), bn, acc[1]);
      acc[2] = fma(T4(am.z), bn, acc[2]);
      acc[3] = fma(T4(am.w), bn, acc[3]);
    }
    workgroupBarrier();
  }
  for (var i = 0u; i < 4u; i++) { c[(m0 + ty * 4u + i) * n4 + c0 + tx] = acc[i]; }
}
