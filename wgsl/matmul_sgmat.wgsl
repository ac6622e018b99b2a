// Tiled matmul for prefill rows on matrix units (Dawn's subgroup matrices, f16 × f16 → f32, 16×16×16),
// f32 tiles out; matmul_splitk.wgsl then sums the splits and applies the epilogue:
//   part[z·mp + m, n] = Σ_{k in split z} a[m, k] · b[n, k]      m < mp, n < ldp
// a is x's rows as f16 (rows_f16.wgsl), b the weight as f16 (dequant_f16.wgsl), both (rows, K) with K a
// multiple of 32 and rows up to the next multiple of 128 present in their buffers: every tile is whole, so
// nothing is clamped or masked (rows past M or N only reach partials nobody reads). mp and ldp are M and N
// rounded up to 128. Split z sums k in [z·kc, min((z + 1)·kc, K)) (kc a multiple of 32; one split: kc = K).
// FUSED_DEQUANT: the MLX 4/8-bit weight itself instead of b (w, scales, biases as in dequant_f16.wgsl), each
// piece decoded by lib/dequant_f16.wgsl as it is staged, so the halves are dequant_f16.wgsl's; rows past N
// read whatever the bounds checks give, finite, into dropped columns.
// Tiles of 128 × 128 × 32 are staged in workgroup memory (lanes copy 16-byte pieces, four lanes a row, and
// store them as f16: whole-fragment copies by subgroupMatrixLoad/Store were 2× slower, bench/NOTES.md #125),
// the next tile's pieces held in registers meanwhile. 2×2 subgroups each own 4×4 fragments of 16×16,
// accumulated in f32 in named variables (arrays of fragments indexed in loops spill to local memory, #113),
// stored straight from the units (the epilogue is matmul_splitk's, so none goes through workgroup memory).
// Sums run in a fixed order per output whatever M is (batch invariance).
// Grid: (mp / 128, ldp / 128, splits): neighbouring workgroups share a weight tile. 128 lanes, subgroups
// of 32 (the host checks both). Workgroup memory: two 128 × 40 f16 tiles (20 KiB).
enable chromium_experimental_subgroup_matrix;
diagnostic(off, chromium.subgroup_matrix_uniformity);
#include "lib/common.wgsl"

const TILE: u32 = 128u;
const BK: u32 = 32u;
const SA: u32 = 40u;   // staged row stride (halves): 32 + 8 of padding against bank conflicts
const LANES: u32 = 128u;

struct Params {
  K: u32,    // reduction length (elements)
  kc: u32,   // k per split (a multiple of 32)
  mp: u32,   // rows of part per split (M rounded up to 128)
  ldp: u32,  // row stride of part (N rounded up to 128)
}
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> a: array<vec4<u32>>;   // (mp, K / 8): 8 halves each
#ifdef FUSED_DEQUANT
override BITS: u32 = 4;
override GS: u32 = 64;
@group(0) @binding(2) var<storage, read> w: array<u32>;        // (N, K·BITS/32)
@group(0) @binding(4) var<storage, read> scales: array<u32>;   // (N, K / GS) 16-bit, two a word
@group(0) @binding(5) var<storage, read> biases: array<u32>;
#include "lib/dequant_f16.wgsl"
#else
@group(0) @binding(2) var<storage, read> b: array<vec4<u32>>;   // (ldp, K / 8)
#endif
@group(0) @binding(3) var<storage, read_write> part: array<f32>;   // (splits · mp, ldp)

var<workgroup> sa: array<f16, TILE * SA>;
var<workgroup> sb: array<f16, TILE * SA>;

alias Left = subgroup_matrix_left<f16, 16, 16>;
alias Right = subgroup_matrix_right<f16, 16, 16>;
alias Acc = subgroup_matrix_result<f32, 16, 16>;

#ifdef FUSED_DEQUANT
// The raw words of weight row n's 8-value unit u: the weight's (one word 4-bit, two 8-bit), its group's
// scale and bias words; decoded by `unit_f16` once staged, so the loads stay in flight over the products.
fn unit_words(n: u32, u: u32) -> vec4<u32> {
  let g = (n * (params.K / GS) + (u * 8u) / GS) >> 1u;
  if (BITS == 4u) { return vec4<u32>(w[n * (params.K / 8u) + u], 0u, scales[g], biases[g]); }
  let i = n * (params.K / 4u) + 2u * u;
  return vec4<u32>(w[i], w[i + 1u], scales[g], biases[g]);
}

// The unit as 8 packed halves (lib/dequant_f16.wgsl: dequant_f16.wgsl's halves).
fn unit_f16(q: vec4<u32>, n: u32, u: u32) -> vec4<u32> {
  let g = n * (params.K / GS) + (u * 8u) / GS;
  return unit_halves(q.x, q.y, half_at(q.z, g), half_at(q.w, g));
}

#endif
// Written as the f16 GEMM experiment's generated code is (bench/experiments/sgmat_gemm.ts): each address
// computed where it is used, the staging inline; a version with precomputed addresses and helper functions
// made the 4B's prefill linears 1.46× slower (bench/NOTES.md #126).
@compute @workgroup_size(LANES)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32,
        @builtin(subgroup_id) sid: u32) {
  let m0 = wid.x * TILE;
  let n0 = wid.y * TILE;
  let sm = sid % 2u;   // this subgroup's 64 rows and 64 columns of the tile
  let sn = sid / 2u;
  let k8 = params.K / 8u;
  let c0 = wid.z * (params.kc / BK);   // this split's first chunk of 32 and their count
  let nk = min(params.K, (wid.z + 1u) * params.kc) / BK - c0;
  var a00 = Acc(); var a01 = Acc(); var a02 = Acc(); var a03 = Acc();
  var a10 = Acc(); var a11 = Acc(); var a12 = Acc(); var a13 = Acc();
  var a20 = Acc(); var a21 = Acc(); var a22 = Acc(); var a23 = Acc();
  var a30 = Acc(); var a31 = Acc(); var a32 = Acc(); var a33 = Acc();
  // Lane t's pieces of a chunk: 16-byte column ch % 4 of rows ch / 4, ch = t + 128·i.
  var pa0: vec4<u32>; var pa1: vec4<u32>; var pa2: vec4<u32>; var pa3: vec4<u32>;
  var pb0: vec4<u32>; var pb1: vec4<u32>; var pb2: vec4<u32>; var pb3: vec4<u32>;
  let c = c0 * 4u;
  { let ch = t + 0u * LANES; pa0 = a[(m0 + ch / 4u) * k8 + c + ch % 4u]; }
  { let ch = t + 1u * LANES; pa1 = a[(m0 + ch / 4u) * k8 + c + ch % 4u]; }
  { let ch = t + 2u * LANES; pa2 = a[(m0 + ch / 4u) * k8 + c + ch % 4u]; }
  { let ch = t + 3u * LANES; pa3 = a[(m0 + ch / 4u) * k8 + c + ch % 4u]; }
#ifdef FUSED_DEQUANT
  { let ch = t + 0u * LANES; pb0 = unit_words(n0 + ch / 4u, c + ch % 4u); }
#else
  { let ch = t + 0u * LANES; pb0 = b[(n0 + ch / 4u) * k8 + c + ch % 4u]; }
#endif
#ifdef FUSED_DEQUANT
  { let ch = t + 1u * LANES; pb1 = unit_words(n0 + ch / 4u, c + ch % 4u); }
#else
  { let ch = t + 1u * LANES; pb1 = b[(n0 + ch / 4u) * k8 + c + ch % 4u]; }
#endif
#ifdef FUSED_DEQUANT
  { let ch = t + 2u * LANES; pb2 = unit_words(n0 + ch / 4u, c + ch % 4u); }
#else
  { let ch = t + 2u * LANES; pb2 = b[(n0 + ch / 4u) * k8 + c + ch % 4u]; }
#endif
#ifdef FUSED_DEQUANT
  { let ch = t + 3u * LANES; pb3 = unit_words(n0 + ch / 4u, c + ch % 4u); }
#else
  { let ch = t + 3u * LANES; pb3 = b[(n0 + ch / 4u) * k8 + c + ch % 4u]; }
#endif
  for (var kt = 0u; kt < nk; kt++) {
    workgroupBarrier();
    { let ch = t + 0u * LANES; let o = (ch / 4u) * SA + (ch % 4u) * 8u; let v = pa0;
      let h0 = bitcast<vec2<f16>>(v.x); let h1 = bitcast<vec2<f16>>(v.y);
      let h2 = bitcast<vec2<f16>>(v.z); let h3 = bitcast<vec2<f16>>(v.w);
      sa[o] = h0.x; sa[o + 1u] = h0.y; sa[o + 2u] = h1.x; sa[o + 3u] = h1.y;
      sa[o + 4u] = h2.x; sa[o + 5u] = h2.y; sa[o + 6u] = h3.x; sa[o + 7u] = h3.y; }
    { let ch = t + 1u * LANES; let o = (ch / 4u) * SA + (ch % 4u) * 8u; let v = pa1;
      let h0 = bitcast<vec2<f16>>(v.x); let h1 = bitcast<vec2<f16>>(v.y);
      let h2 = bitcast<vec2<f16>>(v.z); let h3 = bitcast<vec2<f16>>(v.w);
      sa[o] = h0.x; sa[o + 1u] = h0.y; sa[o + 2u] = h1.x; sa[o + 3u] = h1.y;
      sa[o + 4u] = h2.x; sa[o + 5u] = h2.y; sa[o + 6u] = h3.x; sa[o + 7u] = h3.y; }
    { let ch = t + 2u * LANES; let o = (ch / 4u) * SA + (ch % 4u) * 8u; let v = pa2;
      let h0 = bitcast<vec2<f16>>(v.x); let h1 = bitcast<vec2<f16>>(v.y);
      let h2 = bitcast<vec2<f16>>(v.z); let h3 = bitcast<vec2<f16>>(v.w);
      sa[o] = h0.x; sa[o + 1u] = h0.y; sa[o + 2u] = h1.x; sa[o + 3u] = h1.y;
      sa[o + 4u] = h2.x; sa[o + 5u] = h2.y; sa[o + 6u] = h3.x; sa[o + 7u] = h3.y; }
    { let ch = t + 3u * LANES; let o = (ch / 4u) * SA + (ch % 4u) * 8u; let v = pa3;
      let h0 = bitcast<vec2<f16>>(v.x); let h1 = bitcast<vec2<f16>>(v.y);
      let h2 = bitcast<vec2<f16>>(v.z); let h3 = bitcast<vec2<f16>>(v.w);
      sa[o] = h0.x; sa[o + 1u] = h0.y; sa[o + 2u] = h1.x; sa[o + 3u] = h1.y;
      sa[o + 4u] = h2.x; sa[o + 5u] = h2.y; sa[o + 6u] = h3.x; sa[o + 7u] = h3.y; }
#ifdef FUSED_DEQUANT
    { let ch = t + 0u * LANES; let o = (ch / 4u) * SA + (ch % 4u) * 8u;
      let v = unit_f16(pb0, n0 + ch / 4u, (c0 + kt) * 4u + ch % 4u);
#else
    { let ch = t + 0u * LANES; let o = (ch / 4u) * SA + (ch % 4u) * 8u; let v = pb0;
#endif
      let h0 = bitcast<vec2<f16>>(v.x); let h1 = bitcast<vec2<f16>>(v.y);
      let h2 = bitcast<vec2<f16>>(v.z); let h3 = bitcast<vec2<f16>>(v.w);
      sb[o] = h0.x; sb[o + 1u] = h0.y; sb[o + 2u] = h1.x; sb[o + 3u] = h1.y;
      sb[o + 4u] = h2.x; sb[o + 5u] = h2.y; sb[o + 6u] = h3.x; sb[o + 7u] = h3.y; }
#ifdef FUSED_DEQUANT
    { let ch = t + 1u * LANES; let o = (ch / 4u) * SA + (ch % 4u) * 8u;
      let v = unit_f16(pb1, n0 + ch / 4u, (c0 + kt) * 4u + ch % 4u);
#else
    { let ch = t + 1u * LANES; let o = (ch / 4u) * SA + (ch % 4u) * 8u; let v = pb1;
#endif
      let h0 = bitcast<vec2<f16>>(v.x); let h1 = bitcast<vec2<f16>>(v.y);
      let h2 = bitcast<vec2<f16>>(v.z); let h3 = bitcast<vec2<f16>>(v.w);
      sb[o] = h0.x; sb[o + 1u] = h0.y; sb[o + 2u] = h1.x; sb[o + 3u] = h1.y;
      sb[o + 4u] = h2.x; sb[o + 5u] = h2.y; sb[o + 6u] = h3.x; sb[o + 7u] = h3.y; }
#ifdef FUSED_DEQUANT
    { let ch = t + 2u * LANES; let o = (ch / 4u) * SA + (ch % 4u) * 8u;
      let v = unit_f16(pb2, n0 + ch / 4u, (c0 + kt) * 4u + ch % 4u);
#else
    { let ch = t + 2u * LANES; let o = (ch / 4u) * SA + (ch % 4u) * 8u; let v = pb2;
#endif
      let h0 = bitcast<vec2<f16>>(v.x); let h1 = bitcast<vec2<f16>>(v.y);
      let h2 = bitcast<vec2<f16>>(v.z); let h3 = bitcast<vec2<f16>>(v.w);
      sb[o] = h0.x; sb[o + 1u] = h0.y; sb[o + 2u] = h1.x; sb[o + 3u] = h1.y;
      sb[o + 4u] = h2.x; sb[o + 5u] = h2.y; sb[o + 6u] = h3.x; sb[o + 7u] = h3.y; }
#ifdef FUSED_DEQUANT
    { let ch = t + 3u * LANES; let o = (ch / 4u) * SA + (ch % 4u) * 8u;
      let v = unit_f16(pb3, n0 + ch / 4u, (c0 + kt) * 4u + ch % 4u);
#else
    { let ch = t + 3u * LANES; let o = (ch / 4u) * SA + (ch % 4u) * 8u; let v = pb3;
#endif
      let h0 = bitcast<vec2<f16>>(v.x); let h1 = bitcast<vec2<f16>>(v.y);
      let h2 = bitcast<vec2<f16>>(v.z); let h3 = bitcast<vec2<f16>>(v.w);
      sb[o] = h0.x; sb[o + 1u] = h0.y; sb[o + 2u] = h1.x; sb[o + 3u] = h1.y;
      sb[o + 4u] = h2.x; sb[o + 5u] = h2.y; sb[o + 6u] = h3.x; sb[o + 7u] = h3.y; }
    workgroupBarrier();
    if (kt + 1u < nk) {
      let c = (c0 + kt + 1u) * 4u;
      { let ch = t + 0u * LANES; pa0 = a[(m0 + ch / 4u) * k8 + c + ch % 4u]; }
      { let ch = t + 1u * LANES; pa1 = a[(m0 + ch / 4u) * k8 + c + ch % 4u]; }
      { let ch = t + 2u * LANES; pa2 = a[(m0 + ch / 4u) * k8 + c + ch % 4u]; }
      { let ch = t + 3u * LANES; pa3 = a[(m0 + ch / 4u) * k8 + c + ch % 4u]; }
#ifdef FUSED_DEQUANT
      { let ch = t + 0u * LANES; pb0 = unit_words(n0 + ch / 4u, c + ch % 4u); }
#else
      { let ch = t + 0u * LANES; pb0 = b[(n0 + ch / 4u) * k8 + c + ch % 4u]; }
#endif
#ifdef FUSED_DEQUANT
      { let ch = t + 1u * LANES; pb1 = unit_words(n0 + ch / 4u, c + ch % 4u); }
#else
      { let ch = t + 1u * LANES; pb1 = b[(n0 + ch / 4u) * k8 + c + ch % 4u]; }
#endif
#ifdef FUSED_DEQUANT
      { let ch = t + 2u * LANES; pb2 = unit_words(n0 + ch / 4u, c + ch % 4u); }
#else
      { let ch = t + 2u * LANES; pb2 = b[(n0 + ch / 4u) * k8 + c + ch % 4u]; }
#endif
#ifdef FUSED_DEQUANT
      { let ch = t + 3u * LANES; pb3 = unit_words(n0 + ch / 4u, c + ch % 4u); }
#else
      { let ch = t + 3u * LANES; pb3 = b[(n0 + ch / 4u) * k8 + c + ch % 4u]; }
#endif
    }
    for (var kk = 0u; kk < BK; kk += 16u) {
      let l0 = subgroupMatrixLoad<Left>(&sa, (sm * 4u + 0u) * 16u * SA + kk, false, SA);
      let l1 = subgroupMatrixLoad<Left>(&sa, (sm * 4u + 1u) * 16u * SA + kk, false, SA);
      let l2 = subgroupMatrixLoad<Left>(&sa, (sm * 4u + 2u) * 16u * SA + kk, false, SA);
      let l3 = subgroupMatrixLoad<Left>(&sa, (sm * 4u + 3u) * 16u * SA + kk, false, SA);
      { let r = subgroupMatrixLoad<Right>(&sb, (sn * 4u + 0u) * 16u * SA + kk, true, SA);
      a00 = subgroupMatrixMultiplyAccumulate(l0, r, a00); a10 = subgroupMatrixMultiplyAccumulate(l1, r, a10);
      a20 = subgroupMatrixMultiplyAccumulate(l2, r, a20); a30 = subgroupMatrixMultiplyAccumulate(l3, r, a30);
      }
      { let r = subgroupMatrixLoad<Right>(&sb, (sn * 4u + 1u) * 16u * SA + kk, true, SA);
      a01 = subgroupMatrixMultiplyAccumulate(l0, r, a01); a11 = subgroupMatrixMultiplyAccumulate(l1, r, a11);
      a21 = subgroupMatrixMultiplyAccumulate(l2, r, a21); a31 = subgroupMatrixMultiplyAccumulate(l3, r, a31);
      }
      { let r = subgroupMatrixLoad<Right>(&sb, (sn * 4u + 2u) * 16u * SA + kk, true, SA);
      a02 = subgroupMatrixMultiplyAccumulate(l0, r, a02); a12 = subgroupMatrixMultiplyAccumulate(l1, r, a12);
      a22 = subgroupMatrixMultiplyAccumulate(l2, r, a22); a32 = subgroupMatrixMultiplyAccumulate(l3, r, a32);
      }
      { let r = subgroupMatrixLoad<Right>(&sb, (sn * 4u + 3u) * 16u * SA + kk, true, SA);
      a03 = subgroupMatrixMultiplyAccumulate(l0, r, a03); a13 = subgroupMatrixMultiplyAccumulate(l1, r, a13);
      a23 = subgroupMatrixMultiplyAccumulate(l2, r, a23); a33 = subgroupMatrixMultiplyAccumulate(l3, r, a33);
      }
    }
  }
  let ld = params.ldp;
  let row = wid.z * params.mp + m0;
  subgroupMatrixStore(&part, (row + (sm * 4u + 0u) * 16u) * ld + n0 + (sn * 4u + 0u) * 16u, a00, false, ld);
  subgroupMatrixStore(&part, (row + (sm * 4u + 0u) * 16u) * ld + n0 + (sn * 4u + 1u) * 16u, a01, false, ld);
  subgroupMatrixStore(&part, (row + (sm * 4u + 0u) * 16u) * ld + n0 + (sn * 4u + 2u) * 16u, a02, false, ld);
  subgroupMatrixStore(&part, (row + (sm * 4u + 0u) * 16u) * ld + n0 + (sn * 4u + 3u) * 16u, a03, false, ld);
  subgroupMatrixStore(&part, (row + (sm * 4u + 1u) * 16u) * ld + n0 + (sn * 4u + 0u) * 16u, a10, false, ld);
  subgroupMatrixStore(&part, (row + (sm * 4u + 1u) * 16u) * ld + n0 + (sn * 4u + 1u) * 16u, a11, false, ld);
  subgroupMatrixStore(&part, (row + (sm * 4u + 1u) * 16u) * ld + n0 + (sn * 4u + 2u) * 16u, a12, false, ld);
  subgroupMatrixStore(&part, (row + (sm * 4u + 1u) * 16u) * ld + n0 + (sn * 4u + 3u) * 16u, a13, false, ld);
  subgroupMatrixStore(&part, (row + (sm * 4u + 2u) * 16u) * ld + n0 + (sn * 4u + 0u) * 16u, a20, false, ld);
  subgroupMatrixStore(&part, (row + (sm * 4u + 2u) * 16u) * ld + n0 + (sn * 4u + 1u) * 16u, a21, false, ld);
  subgroupMatrixStore(&part, (row + (sm * 4u + 2u) * 16u) * ld + n0 + (sn * 4u + 2u) * 16u, a22, false, ld);
  subgroupMatrixStore(&part, (row + (sm * 4u + 2u) * 16u) * ld + n0 + (sn * 4u + 3u) * 16u, a23, false, ld);
  subgroupMatrixStore(&part, (row + (sm * 4u + 3u) * 16u) * ld + n0 + (sn * 4u + 0u) * 16u, a30, false, ld);
  subgroupMatrixStore(&part, (row + (sm * 4u + 3u) * 16u) * ld + n0 + (sn * 4u + 1u) * 16u, a31, false, ld);
  subgroupMatrixStore(&part, (row + (sm * 4u + 3u) * 16u) * ld + n0 + (sn * 4u + 2u) * 16u, a32, false, ld);
  subgroupMatrixStore(&part, (row + (sm * 4u + 3u) * 16u) * ld + n0 + (sn * 4u + 3u) * 16u, a33, false, ld);
}
