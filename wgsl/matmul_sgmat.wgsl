// Tiled matmul for prefill rows on matrix units (Dawn's subgroup matrices, f16 × f16 → f32, 16×16×16):
//   y[row0 + m, n_off + n] (=|+=) Σ_k a[m, k] · b[n, k] (+ bias[n])      m < M, n < N
// a is x's rows as f16 (rows_f16.wgsl), b the weight as f16 (dequant_f16.wgsl), both (rows, K) with K a
// multiple of 32; epilogues as in the other matmul kernels (lib/matmul.wgsl). Tiles of 128 × 128 × 32 are
// staged in workgroup memory (lanes copy 16-byte pieces, four lanes a row), the next tile's pieces held in
// registers meanwhile. 2×2 subgroups each own 4×4 fragments of 16×16, accumulated in f32 in named
// variables: arrays of fragments indexed in loops spill to local memory (bench/NOTES.md #113). Each fragment
// leaves through a 16×16 f32 scratch per subgroup, where its lanes apply the epilogue (rows past M, columns
// past N dropped). Sums run in a fixed order per output whatever M is (batch invariance).
// SPLITK (grid z = splits): workgroup z sums k in [z·kc, min((z+1)·kc, K)) only and writes that partial,
// f32, to rows z·M + m of y (ldy = N, n_off = row0 = 0); matmul_splitk.wgsl adds them in order.
// Grid: (ceil(M / 128), ceil(N / 128), splits): neighbouring workgroups share a weight tile, so W streams
// from memory once while x's rows stay in L2. 128 lanes, subgroups of 32 (the host checks both).
// Workgroup memory: two 128 × 40 f16 tiles (20 KiB), 4 KiB of epilogue scratch.
enable chromium_experimental_subgroup_matrix;
diagnostic(off, chromium.subgroup_matrix_uniformity);
#include "lib/common.wgsl"

const TILE: u32 = 128u;
const BK: u32 = 32u;
const SA: u32 = 40u;        // staged row stride (halves): 32 + 8 of padding against bank conflicts

struct Params {
  M: u32,      // rows
  N: u32,      // output columns held by this weight buffer
  K: u32,      // reduction length (elements)
  row0: u32,   // first row of y written (rows); a's rows start at 0
  ldy: u32,    // row stride of y (elements)
  n_off: u32,  // column of y where this weight's output starts (elements)
#ifdef SPLITK
  kc: u32,     // k per split (a multiple of 32)
#endif
}
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> a: array<vec4<u32>>;   // (M, K / 8): 8 halves each
@group(0) @binding(2) var<storage, read> b: array<vec4<u32>>;   // (N, K / 8)

#include "lib/matmul.wgsl"

var<workgroup> sa: array<f16, TILE * SA>;
var<workgroup> sb: array<f16, TILE * SA>;
var<workgroup> ep: array<f32, 4u * 256u>;

alias Left = subgroup_matrix_left<f16, 16, 16>;
alias Right = subgroup_matrix_right<f16, 16, 16>;
alias Acc = subgroup_matrix_result<f32, 16, 16>;

// The four 16-byte pieces lane t copies of a tile: piece p = t + 128·i is row p / 4, halves 8·(p % 4)...
struct Pieces { p0: vec4<u32>, p1: vec4<u32>, p2: vec4<u32>, p3: vec4<u32> }

fn fetch_a(m0: u32, t: u32, chunk: u32) -> Pieces {
  let k8 = params.K / 8u;
  let c = chunk * 4u + t % 4u;
  let r = t / 4u;
  let last = params.M - 1u;
  return Pieces(a[min(m0 + r, last) * k8 + c], a[min(m0 + r + 32u, last) * k8 + c],
                a[min(m0 + r + 64u, last) * k8 + c], a[min(m0 + r + 96u, last) * k8 + c]);
}

fn fetch_b(n0: u32, t: u32, chunk: u32) -> Pieces {
  let k8 = params.K / 8u;
  let c = chunk * 4u + t % 4u;
  let r = t / 4u;
  let last = params.N - 1u;
  return Pieces(b[min(n0 + r, last) * k8 + c], b[min(n0 + r + 32u, last) * k8 + c],
                b[min(n0 + r + 64u, last) * k8 + c], b[min(n0 + r + 96u, last) * k8 + c]);
}

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

fn stage(t: u32, pa: Pieces, pb: Pieces) {
  let o = (t / 4u) * SA + (t % 4u) * 8u;
  let step = 32u * SA;   // 32 rows further
  put_a(o, pa.p0); put_a(o + step, pa.p1); put_a(o + 2u * step, pa.p2); put_a(o + 3u * step, pa.p3);
  put_b(o, pb.p0); put_b(o + step, pb.p1); put_b(o + 2u * step, pb.p2); put_b(o + 3u * step, pb.p3);
}

// Fragment (i, j) of subgroup (sm, sn) out through its scratch: lane l takes elements l, l + 32, ...
fn emit(acc: Acc, sid: u32, lane: u32, m0: u32, n0: u32, row: u32) {
  subgroupMatrixStore(&ep, sid * 256u, acc, false, 16u);
  workgroupBarrier();
  for (var e = lane; e < 256u; e += 32u) {
    let m = m0 + e / 16u;
    let n = n0 + e % 16u;
    if (m < params.M && n < params.N) { store(row + m, n, ep[sid * 256u + e]); }
  }
  workgroupBarrier();
}

@compute @workgroup_size(128)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32,
        @builtin(subgroup_id) sid: u32, @builtin(subgroup_invocation_id) lane: u32) {
  let m0 = wid.x * TILE;
  let n0 = wid.y * TILE;
  let fm = (sid % 2u) * 64u;   // this subgroup's rows and columns in the tile
  let fc = (sid / 2u) * 64u;
#ifdef SPLITK
  let k0 = wid.z * (params.kc / BK);   // first and last chunk of this split
  let k1 = min(params.K, (wid.z + 1u) * params.kc) / BK;
  let row = wid.z * params.M;
#else
  let k0 = 0u;
  let k1 = params.K / BK;
  let row = params.row0;
#endif
  var next_a = fetch_a(m0, t, k0);
  var next_b = fetch_b(n0, t, k0);
  var a00 = Acc(); var a01 = Acc(); var a02 = Acc(); var a03 = Acc();
  var a10 = Acc(); var a11 = Acc(); var a12 = Acc(); var a13 = Acc();
  var a20 = Acc(); var a21 = Acc(); var a22 = Acc(); var a23 = Acc();
  var a30 = Acc(); var a31 = Acc(); var a32 = Acc(); var a33 = Acc();
  for (var chunk = k0; chunk < k1; chunk++) {
    workgroupBarrier();
    stage(t, next_a, next_b);
    workgroupBarrier();
    if (chunk + 1u < k1) {
      next_a = fetch_a(m0, t, chunk + 1u);
      next_b = fetch_b(n0, t, chunk + 1u);
    }
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
  emit(a00, sid, lane, rm, cn, row); emit(a01, sid, lane, rm, cn + 16u, row);
  emit(a02, sid, lane, rm, cn + 32u, row); emit(a03, sid, lane, rm, cn + 48u, row);
  emit(a10, sid, lane, rm + 16u, cn, row); emit(a11, sid, lane, rm + 16u, cn + 16u, row);
  emit(a12, sid, lane, rm + 16u, cn + 32u, row); emit(a13, sid, lane, rm + 16u, cn + 48u, row);
  emit(a20, sid, lane, rm + 32u, cn, row); emit(a21, sid, lane, rm + 32u, cn + 16u, row);
  emit(a22, sid, lane, rm + 32u, cn + 32u, row); emit(a23, sid, lane, rm + 32u, cn + 48u, row);
  emit(a30, sid, lane, rm + 48u, cn, row); emit(a31, sid, lane, rm + 48u, cn + 16u, row);
  emit(a32, sid, lane, rm + 48u, cn + 32u, row); emit(a33, sid, lane, rm + 48u, cn + 48u, row);
}
