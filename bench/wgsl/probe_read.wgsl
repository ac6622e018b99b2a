// Bandwidth probe: streams a buffer once and xor-reduces it, the ceiling decode GEMVs are measured against.
//   acc = xor of every vec4<u32> of src;  written only if it equals params.magic (never, in practice), so
//   the reads cannot be optimized away and nothing else touches memory.
// Bindings:  src  (n) vec4<u32>
//            out  (1) u32
// Grid: ceil(n / (WG·ITEMS)) workgroups, folded 2-D; lane t reads base + t + i·WG, i < ITEMS (coalesced).
#include "lib/common.wgsl"

override WG: u32 = 512;
override ITEMS: u32 = 8;

struct Params {
  n: u32,      // vec4 elements in src
  magic: u32,  // a value acc never takes
}
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> src: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let base = wg_linear(wid, nwg) * WG * ITEMS;
  var acc = vec4<u32>(0u);
  for (var i = 0u; i < ITEMS; i++) {
    let j = base + lid + i * WG;
    if (j < params.n) { acc ^= src[j]; }
  }
  let r = acc.x ^ acc.y ^ acc.z ^ acc.w;
  if (r == params.magic) { out[0] = r; }
}
