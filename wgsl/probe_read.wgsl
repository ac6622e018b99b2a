// Bandwidth probe (kernel lab, benchmark): streams a large buffer once, the streaming-read ceiling that
// bandwidth-bound kernels (matmul_vec, decode attention) are compared against.
//   every lane folds src[i], i = gid, gid + stride, ... with xor, and writes only if the fold equals `magic`
//   (never, in practice; the compiler cannot know that, so no load is dropped).
// Bindings:  src (n) vec4<u32>;  out (stride) u32
// Grid: ceil(stride / WG) workgroups folded 2-D; stride = lanes in the grid. Consecutive lanes read
// consecutive vec4s on every iteration (coalesced).
#include "lib/common.wgsl"

override WG: u32 = 256;

struct Params {
  n: u32,       // vec4s in src
  stride: u32,  // lanes in the grid
  magic: u32,   // a value the fold never takes
}
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> src: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let g = wg_linear(wid, nwg) * WG + lid;
  if (g >= params.stride) { return; }
  var acc = vec4<u32>(0u);
  for (var i = g; i < params.n; i += params.stride) { acc = acc ^ src[i]; }
  let v = acc.x ^ acc.y ^ acc.z ^ acc.w;
  if (v == params.magic) { out[g] = v; }
}
