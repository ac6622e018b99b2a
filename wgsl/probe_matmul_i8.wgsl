// Compute-rate probe for integer dot products (kernel lab, benchmark): C = A·Bᵀ for square n×n int8
// matrices, the plainly good tiled matmul of probe_matmul.wgsl with four products per dot4I8Packed: the
// ceiling the int8-x prefill matmul (matmul_tiled_x8.wgsl) is compared against. Exact in i32.
// Bindings:  a (n, n) int8, b (n, n) int8 = Bᵀ (row j holds column j), both packed 4 per u32 along k and read
//            as vec4<u32> (16 values);  c (n, n) i32, written as vec4<i32>
// Grid: (n / 64, n / 64). 256 lanes (16×16) own a 64×64 tile of C, each lane a 4×4 block (rows ty·4..,
// columns tx·4..); K is walked in stages of 64 values (16 words) staged in workgroup memory, word-major so a
// lane reads one vec4 (its 4 rows, or its 4 columns) per word. n must be a multiple of 64.
const TS: u32 = 64u;   // tile of C
const BW: u32 = 16u;   // words of k per stage (64 values)

struct Params {
  n: u32,  // matrix size (multiple of 64)
}
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> a: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> b: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read_write> c: array<vec4<i32>>;

var<workgroup> as_: array<vec4<u32>, BW * 16u>;  // [word][row / 4]: words of rows 4r'..4r'+3
var<workgroup> bs: array<vec4<u32>, BW * 16u>;   // [word][column / 4]

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let n16 = params.n / 16u;   // vec4<u32> per row
  let m0 = wid.y * TS;
  let j0 = wid.x * TS;
  let tx = lid % 16u;
  let ty = lid / 16u;
  var acc0 = vec4<i32>(0);
  var acc1 = vec4<i32>(0);
  var acc2 = vec4<i32>(0);
  var acc3 = vec4<i32>(0);
  // Staging: lane → row (or column) r = lid / 4, words 4·(lid % 4) .. +3 of the stage.
  let r = lid / 4u;
  let kq = lid % 4u;
  for (var k0 = 0u; k0 < n16; k0 += 4u) {
    let av = a[(m0 + r) * n16 + k0 + kq];
    let bv = b[(j0 + r) * n16 + k0 + kq];
    for (var e = 0u; e < 4u; e++) {
      as_[(4u * kq + e) * 16u + r / 4u][r % 4u] = av[e];
      bs[(4u * kq + e) * 16u + r / 4u][r % 4u] = bv[e];
    }
    workgroupBarrier();
    for (var kk = 0u; kk < BW; kk++) {
      let am = as_[kk * 16u + ty];
      let bn = bs[kk * 16u + tx];
      acc0 += vec4<i32>(dot4I8Packed(am.x, bn.x), dot4I8Packed(am.x, bn.y),
                          dot4I8Packed(am.x, bn.z), dot4I8Packed(am.x, bn.w));
      acc1 += vec4<i32>(dot4I8Packed(am.y, bn.x), dot4I8Packed(am.y, bn.y),
                          dot4I8Packed(am.y, bn.z), dot4I8Packed(am.y, bn.w));
      acc2 += vec4<i32>(dot4I8Packed(am.z, bn.x), dot4I8Packed(am.z, bn.y),
                          dot4I8Packed(am.z, bn.z), dot4I8Packed(am.z, bn.w));
      acc3 += vec4<i32>(dot4I8Packed(am.w, bn.x), dot4I8Packed(am.w, bn.y),
                          dot4I8Packed(am.w, bn.z), dot4I8Packed(am.w, bn.w));
    }
    workgroupBarrier();
  }
  let n4 = params.n / 4u;
  let cb = (m0 + ty * 4u) * n4 + j0 / 4u + tx;
  c[cb] = acc0;
  c[cb + n4] = acc1;
  c[cb + 2u * n4] = acc2;
  c[cb + 3u * n4] = acc3;
}
