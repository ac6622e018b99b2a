// Experiment (bench/NOTES.md #126): the first rewrite of wgsl/matmul_sgmat.wgsl, same bindings and grid,
// with the piece addresses precomputed and the staging in helper functions; 4,950–4,980 µs a 4B layer at
// 2,048 rows in the engine against the kept kernel's 3,412. Run by
// `bench/experiments/sgmat_gemm.ts --engine --kernel bench/experiments/matmul_sgmat_precomputed.wgsl`.
// Tiled matmul for prefill rows on matrix units (Dawn's subgroup matrices, f16 × f16 → f32, 16×16×16),
// f32 tiles out; matmul_splitk.wgsl then sums the splits and applies the epilogue:
//   part[z·mp + m, n] = Σ_{k in split z} a[m, k] · b[n, k]      m < mp, n < ldp
// a is x's rows as f16 (rows_f16.wgsl), b the weight as f16 (dequant_f16.wgsl), both (rows, K) with K a
// multiple of 32 and rows up to the next multiple of 128 present in their buffers: every tile is whole, so
// nothing is clamped or masked (rows past M or N only reach partials nobody reads). mp and ldp are M and N
// rounded up to 128. Split z sums k in [z·kc, min((z + 1)·kc, K)) (kc a multiple of 32; one split: kc = K).
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
@group(0) @binding(2) var<storage, read> b: array<vec4<u32>>;   // (ldp, K / 8)
@group(0) @binding(3) var<storage, read_write> part: array<f32>;   // (splits · mp, ldp)

var<workgroup> sa: array<f16, TILE * SA>;
var<workgroup> sb: array<f16, TILE * SA>;

alias Left = subgroup_matrix_left<f16, 16, 16>;
alias Right = subgroup_matrix_right<f16, 16, 16>;
alias Acc = subgroup_matrix_result<f32, 16, 16>;

// Piece i of lane t (i < 4): row t / 4 + 32·i of the tile, halves 8·(t % 4)...; its offset in the staging.
fn staged(t: u32, i: u32) -> u32 { return (t / 4u + 32u * i) * SA + (t % 4u) * 8u; }

fn put_a(o: u32, v: vec4<u32>) {
  let h0 = bitcast<vec2<f16>>(v.x); let h1 = bitcast<vec2<f16>>(v.y);
  let h2 = bitcast<vec2<f16>>(v.z); let h3 = bitcast<vec2<f16>>(v.w);
  sa[o] = h0.x; sa[o + 1u] = h0.y; sa[o + 2u] = h1.x; sa[o + 3u] = h1.y;
  sa[o + 4u] = h2.x; sa[o + 5u] = h2.y; sa[o + 6u] = h3.x; sa[o + 7u] = h3.y;
}

fn put_b(o: u32, v: vec4<u32>) {
  let h0 = bitcast<vec2<f16>>(v.x); let h1 = bitcast<vec2<f16>>(v.y);
  let h2 = bitcast<vec2<f16>>(v.z); let h3 = bitcast<vec2<f16>>(v.w);
  sb[o] = h0.x; sb[o + 1u] = h0.y; sb[o + 2u] = h1.x; sb[o + 3u] = h1.y;
  sb[o + 4u] = h2.x; sb[o + 5u] = h2.y; sb[o + 6u] = h3.x; sb[o + 7u] = h3.y;
}

@compute @workgroup_size(LANES)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32,
        @builtin(subgroup_id) sid: u32) {
  let m0 = wid.x * TILE;
  let n0 = wid.y * TILE;
  let fm = (sid % 2u) * 64u;   // this subgroup's rows and columns in the tile
  let fc = (sid / 2u) * 64u;
  let k8 = params.K / 8u;
  let c0 = wid.z * (params.kc / BK);   // first and last chunk of this split
  let c1 = min(params.K, (wid.z + 1u) * params.kc) / BK;
  // Lane t's pieces: rows m0 + t / 4 + 32·i of a (n0 + ... of b), 16-byte column t % 4 of the chunk.
  let ra = (m0 + t / 4u) * k8 + t % 4u;
  let rb = (n0 + t / 4u) * k8 + t % 4u;
  let step = 32u * k8;
  var pa0 = a[ra + c0 * 4u]; var pa1 = a[ra + step + c0 * 4u];
  var pa2 = a[ra + 2u * step + c0 * 4u]; var pa3 = a[ra + 3u * step + c0 * 4u];
  var pb0 = b[rb + c0 * 4u]; var pb1 = b[rb + step + c0 * 4u];
  var pb2 = b[rb + 2u * step + c0 * 4u]; var pb3 = b[rb + 3u * step + c0 * 4u];
  var a00 = Acc(); var a01 = Acc(); var a02 = Acc(); var a03 = Acc();
  var a10 = Acc(); var a11 = Acc(); var a12 = Acc(); var a13 = Acc();
  var a20 = Acc(); var a21 = Acc(); var a22 = Acc(); var a23 = Acc();
  var a30 = Acc(); var a31 = Acc(); var a32 = Acc(); var a33 = Acc();
  for (var chunk = c0; chunk < c1; chunk++) {
    workgroupBarrier();
    put_a(staged(t, 0u), pa0); put_a(staged(t, 1u), pa1);
    put_a(staged(t, 2u), pa2); put_a(staged(t, 3u), pa3);
    put_b(staged(t, 0u), pb0); put_b(staged(t, 1u), pb1);
    put_b(staged(t, 2u), pb2); put_b(staged(t, 3u), pb3);
    workgroupBarrier();
    if (chunk + 1u < c1) {
      let c = (chunk + 1u) * 4u;
      pa0 = a[ra + c]; pa1 = a[ra + step + c]; pa2 = a[ra + 2u * step + c]; pa3 = a[ra + 3u * step + c];
      pb0 = b[rb + c]; pb1 = b[rb + step + c]; pb2 = b[rb + 2u * step + c]; pb3 = b[rb + 3u * step + c];
    }
    for (var kk = 0u; kk < BK; kk += 16u) {
      let l0 = subgroupMatrixLoad<Left>(&sa, fm * SA + kk, false, SA);
      let l1 = subgroupMatrixLoad<Left>(&sa, (fm + 16u) * SA + kk, false, SA);
      let l2 = subgroupMatrixLoad<Left>(&sa, (fm + 32u) * SA + kk, false, SA);
      let l3 = subgroupMatrixLoad<Left>(&sa, (fm + 48u) * SA + kk, false, SA);
      let r0 = subgroupMatrixLoad<Right>(&sb, fc * SA + kk, true, SA);
      a00 = subgroupMatrixMultiplyAccumulate(l0, r0, a00); a10 = subgroupMatrixMultiplyAccumulate(l1, r0, a10);
      a20 = subgroupMatrixMultiplyAccumulate(l2, r0, a20); a30 = subgroupMatrixMultiplyAccumulate(l3, r0, a30);
      let r1 = subgroupMatrixLoad<Right>(&sb, (fc + 16u) * SA + kk, true, SA);
      a01 = subgroupMatrixMultiplyAccumulate(l0, r1, a01); a11 = subgroupMatrixMultiplyAccumulate(l1, r1, a11);
      a21 = subgroupMatrixMultiplyAccumulate(l2, r1, a21); a31 = subgroupMatrixMultiplyAccumulate(l3, r1, a31);
      let r2 = subgroupMatrixLoad<Right>(&sb, (fc + 32u) * SA + kk, true, SA);
      a02 = subgroupMatrixMultiplyAccumulate(l0, r2, a02); a12 = subgroupMatrixMultiplyAccumulate(l1, r2, a12);
      a22 = subgroupMatrixMultiplyAccumulate(l2, r2, a22); a32 = subgroupMatrixMultiplyAccumulate(l3, r2, a32);
      let r3 = subgroupMatrixLoad<Right>(&sb, (fc + 48u) * SA + kk, true, SA);
      a03 = subgroupMatrixMultiplyAccumulate(l0, r3, a03); a13 = subgroupMatrixMultiplyAccumulate(l1, r3, a13);
      a23 = subgroupMatrixMultiplyAccumulate(l2, r3, a23); a33 = subgroupMatrixMultiplyAccumulate(l3, r3, a33);
    }
  }
  let ld = params.ldp;
  let o = (wid.z * params.mp + m0 + fm) * ld + n0 + fc;   // this subgroup's first output
  let r16 = 16u * ld;
  subgroupMatrixStore(&part, o, a00, false, ld); subgroupMatrixStore(&part, o + 16u, a01, false, ld);
  subgroupMatrixStore(&part, o + 32u, a02, false, ld); subgroupMatrixStore(&part, o + 48u, a03, false, ld);
  let o1 = o + r16;
  subgroupMatrixStore(&part, o1, a10, false, ld); subgroupMatrixStore(&part, o1 + 16u, a11, false, ld);
  subgroupMatrixStore(&part, o1 + 32u, a12, false, ld); subgroupMatrixStore(&part, o1 + 48u, a13, false, ld);
  let o2 = o + 2u * r16;
  subgroupMatrixStore(&part, o2, a20, false, ld); subgroupMatrixStore(&part, o2 + 16u, a21, false, ld);
  subgroupMatrixStore(&part, o2 + 32u, a22, false, ld); subgroupMatrixStore(&part, o2 + 48u, a23, false, ld);
  let o3 = o + 3u * r16;
  subgroupMatrixStore(&part, o3, a30, false, ld); subgroupMatrixStore(&part, o3 + 16u, a31, false, ld);
  subgroupMatrixStore(&part, o3 + 32u, a32, false, ld); subgroupMatrixStore(&part, o3 + 48u, a33, false, ld);
}
