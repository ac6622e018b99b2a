// Tiled matmul for prefill rows on matrix units (Dawn's subgroup matrices, f16 × f16 → f32, 16×16×16):
//   y[row0 + m, n_off + n] (=|+=) Σ_k x[row0 + m, k] · W[n, k]      m < M, n < N;  W MLX affine 4-bit
// Same params, bindings and epilogues as matmul_tiled.wgsl (x f32; no BIAS). x and W (dequantized:
// scale·q + bias) are staged as f16 in workgroup memory 32 k at a time (one quant chunk: one scale a row),
// the next chunk's raw words prefetched into registers meanwhile. Lane t stages row t of both tiles.
// 2×2 subgroups each own 4×4 fragments of 16×16 (a 128×128 tile), accumulated in f32 in named variables:
// arrays of fragments indexed in loops spill to local memory (bench/NOTES.md #113). Each fragment leaves
// through a 16×16 f32 scratch per subgroup, where its lanes apply lib/matmul.wgsl's epilogue (rows past M,
// columns past N dropped). Sums run in a fixed order per output whatever M is (batch invariance).
// Grid: (ceil(N / 128), ceil(M / 128)); 128 lanes, subgroups of 32 (the host checks both).
// Workgroup memory: two 128 × 40 f16 tiles (20 KiB), 4 KiB of epilogue scratch.
// x goes to f16 unscaled: an activation past 65504 would overflow (the int8-x and f32 kernels scale or keep
// it); a reason to keep it off for models with such outliers until scaled per chunk.
enable chromium_experimental_subgroup_matrix;
diagnostic(off, chromium.subgroup_matrix_uniformity);
#include "lib/common.wgsl"

override GS: u32 = 64;
const TILE: u32 = 128u;
const BK: u32 = 32u;
const SA: u32 = 40u;        // staged row stride (halves): 32 + 8 of padding against bank conflicts

struct Params {
  M: u32,      // rows
  N: u32,      // output columns held by this weight buffer
  K: u32,      // reduction length (elements)
  row0: u32,   // first row of x and y used (rows)
  ldy: u32,    // row stride of y (elements)
  n_off: u32,  // column of y where this weight's output starts (elements)
}
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;   // matmul inputs are f32
@group(0) @binding(2) var<storage, read> w: array<vec4<u32>>;   // 32 nibbles a vec4
@group(0) @binding(3) var<storage, read> scales: array<u32>;
@group(0) @binding(4) var<storage, read> biases: array<u32>;

#include "lib/matmul.wgsl"

var<workgroup> sa: array<f16, TILE * SA>;
var<workgroup> sb: array<f16, TILE * SA>;
var<workgroup> ep: array<f32, 4u * 256u>;

alias Left = subgroup_matrix_left<f16, 16, 16>;
alias Right = subgroup_matrix_right<f16, 16, 16>;
alias Acc = subgroup_matrix_result<f32, 16, 16>;

// Row t's staged x chunk (8 vec4 of f32) and W chunk (one vec4 of nibbles, scale | bias).
struct Chunk { x0: vec4<f32>, x1: vec4<f32>, x2: vec4<f32>, x3: vec4<f32>,
               x4: vec4<f32>, x5: vec4<f32>, x6: vec4<f32>, x7: vec4<f32>, wq: vec4<u32>, sb: u32 }

fn fetch(m: u32, n: u32, kc: u32) -> Chunk {
  let xi = (params.row0 + m) * (params.K / 4u) + kc * 8u;
  let gi = n * (params.K / GS) + (kc * BK) / GS;
  let sh = (gi & 1u) * 16u;
  let scale_bias = ((scales[gi >> 1u] >> sh) & 0xffffu) | (((biases[gi >> 1u] >> sh) & 0xffffu) << 16u);
  return Chunk(x[xi], x[xi + 1u], x[xi + 2u], x[xi + 3u], x[xi + 4u], x[xi + 5u], x[xi + 6u], x[xi + 7u],
               w[n * (params.K / BK) + kc], scale_bias);
}

fn put_x(o: u32, v: vec4<f32>) {
  sa[o] = f16(v.x); sa[o + 1u] = f16(v.y); sa[o + 2u] = f16(v.z); sa[o + 3u] = f16(v.w);
}

// 8 weights of one word: w = scale·q + bias (q by the 2^23 mantissa trick), as f16.
fn put_w(o: u32, word: u32, s: f32, b: f32) {
  let lo = bitcast<vec4<f32>>(((vec4<u32>(word) >> vec4<u32>(0u, 4u, 8u, 12u)) & vec4<u32>(15u)) |
                              vec4<u32>(0x4b000000u)) - vec4<f32>(8388608.0);
  let hi = bitcast<vec4<f32>>(((vec4<u32>(word) >> vec4<u32>(16u, 20u, 24u, 28u)) & vec4<u32>(15u)) |
                              vec4<u32>(0x4b000000u)) - vec4<f32>(8388608.0);
  let a = fma(vec4<f32>(s), lo, vec4<f32>(b));
  let c = fma(vec4<f32>(s), hi, vec4<f32>(b));
  sb[o] = f16(a.x); sb[o + 1u] = f16(a.y); sb[o + 2u] = f16(a.z); sb[o + 3u] = f16(a.w);
  sb[o + 4u] = f16(c.x); sb[o + 5u] = f16(c.y); sb[o + 6u] = f16(c.z); sb[o + 7u] = f16(c.w);
}

fn stage(t: u32, c: Chunk) {
  let o = t * SA;
  put_x(o, c.x0); put_x(o + 4u, c.x1); put_x(o + 8u, c.x2); put_x(o + 12u, c.x3);
  put_x(o + 16u, c.x4); put_x(o + 20u, c.x5); put_x(o + 24u, c.x6); put_x(o + 28u, c.x7);
  let s = half16(c.sb & 0xffffu);
  let b = half16(c.sb >> 16u);
  put_w(o, c.wq.x, s, b); put_w(o + 8u, c.wq.y, s, b);
  put_w(o + 16u, c.wq.z, s, b); put_w(o + 24u, c.wq.w, s, b);
}

// Fragment (i, j) of subgroup (sm, sn) out through its scratch: lane l takes elements l, l + 32, ...
fn emit(acc: Acc, sid: u32, lane: u32, m0: u32, n0: u32) {
  subgroupMatrixStore(&ep, sid * 256u, acc, false, 16u);
  workgroupBarrier();
  for (var e = lane; e < 256u; e += 32u) {
    let m = m0 + e / 16u;
    let n = n0 + e % 16u;
    if (m < params.M && n < params.N) { store(params.row0 + m, n, ep[sid * 256u + e]); }
  }
  workgroupBarrier();
}

@compute @workgroup_size(128)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32,
        @builtin(subgroup_id) sid: u32, @builtin(subgroup_invocation_id) lane: u32) {
  let m0 = wid.y * TILE;
  let n0 = wid.x * TILE;
  let fm = (sid % 2u) * 64u;   // this subgroup's rows and columns in the tile
  let fc = (sid / 2u) * 64u;
  let mt = min(m0 + t, params.M - 1u);
  let nt = min(n0 + t, params.N - 1u);
  let nk = params.K / BK;
  var next = fetch(mt, nt, 0u);
  var a00 = Acc(); var a01 = Acc(); var a02 = Acc(); var a03 = Acc();
  var a10 = Acc(); var a11 = Acc(); var a12 = Acc(); var a13 = Acc();
  var a20 = Acc(); var a21 = Acc(); var a22 = Acc(); var a23 = Acc();
  var a30 = Acc(); var a31 = Acc(); var a32 = Acc(); var a33 = Acc();
  for (var kc = 0u; kc < nk; kc++) {
    workgroupBarrier();
    stage(t, next);
    workgroupBarrier();
    if (kc + 1u < nk) { next = fetch(mt, nt, kc + 1u); }
    for (var kk = 0u; kk < BK; kk += 16u) {
      let l0 = subgroupMatrixLoad<Left>(&sa, fm * SA + kk, false, SA);
      let l1 = subgroupMatrixLoad<Left>(&sa, (fm + 16u) * SA + kk, false, SA);
      let l2 = subgroupMatrixLoad<Left>(&sa, (fm + 32u) * SA + kk, false, SA);
      let l3 = subgroupMatrixLoad<Left>(&sa, (fm + 48u) * SA + kk, false, SA);
      var r = subgroupMatrixLoad<Right>(&sb, fc * SA + kk, true, SA);
      a00 = subgroupMatrixMultiplyAccumulate(l0, r, a00); a10 = subgroupMatrixMultiplyAccumulate(l1, r, a10);
      a20 = subgroupMatrixMultiplyAccumulate(l2, r, a20); a30 = subgroupMatrixMultiplyAccumulate(l3, r, a30);
      r = subgroupMatrixLoad<Right>(&sb, (fc + 16u) * SA + kk, true, SA);
      a01 = subgroupMatrixMultiplyAccumulate(l0, r, a01); a11 = subgroupMatrixMultiplyAccumulate(l1, r, a11);
      a21 = subgroupMatrixMultiplyAccumulate(l2, r, a21); a31 = subgroupMatrixMultiplyAccumulate(l3, r, a31);
      r = subgroupMatrixLoad<Right>(&sb, (fc + 32u) * SA + kk, true, SA);
      a02 = subgroupMatrixMultiplyAccumulate(l0, r, a02); a12 = subgroupMatrixMultiplyAccumulate(l1, r, a12);
      a22 = subgroupMatrixMultiplyAccumulate(l2, r, a22); a32 = subgroupMatrixMultiplyAccumulate(l3, r, a32);
      r = subgroupMatrixLoad<Right>(&sb, (fc + 48u) * SA + kk, true, SA);
      a03 = subgroupMatrixMultiplyAccumulate(l0, r, a03); a13 = subgroupMatrixMultiplyAccumulate(l1, r, a13);
      a23 = subgroupMatrixMultiplyAccumulate(l2, r, a23); a33 = subgroupMatrixMultiplyAccumulate(l3, r, a33);
    }
  }
  let rm = m0 + fm;
  let cn = n0 + fc;
  emit(a00, sid, lane, rm, cn); emit(a01, sid, lane, rm, cn + 16u);
  emit(a02, sid, lane, rm, cn + 32u); emit(a03, sid, lane, rm, cn + 48u);
  emit(a10, sid, lane, rm + 16u, cn); emit(a11, sid, lane, rm + 16u, cn + 16u);
  emit(a12, sid, lane, rm + 16u, cn + 32u); emit(a13, sid, lane, rm + 16u, cn + 48u);
  emit(a20, sid, lane, rm + 32u, cn); emit(a21, sid, lane, rm + 32u, cn + 16u);
  emit(a22, sid, lane, rm + 32u, cn + 32u); emit(a23, sid, lane, rm + 32u, cn + 48u);
  emit(a30, sid, lane, rm + 48u, cn); emit(a31, sid, lane, rm + 48u, cn + 16u);
  emit(a32, sid, lane, rm + 48u, cn + 32u); emit(a33, sid, lane, rm + 48u, cn + 48u);
}
