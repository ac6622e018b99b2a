// Tiled matmul for many rows (prefill chunks), compute-bound:
//   y[row0 + m, n_off + n] (=|+=) Σ_k x[row0 + m, k] · W[n, k] (+ bias[n])      m < M, n < N
// Same weight formats, epilogues and bindings as matmul_vec.wgsl (x f32; w read as plain u32 words here).
// Grid: (ceil(N / BN), ceil(M / BM)), BM = 16·TM (TM = 4 or 8), BN = 64 or 128 (TN8). 256 lanes (16×16) own
// one BM×BN tile, each lane TM×4 (or TM×8) outputs held in named vec4 accumulators (arrays indexed in loops
// can spill to local memory).
// K is walked in tiles of 32 values (one quant unit): the x tile and the W tile, dequantized once per tile,
// are staged in workgroup memory as k-major vec4s; the next tile's raw words are prefetched into registers
// while the current one is multiplied. Each output is a sequential sum over k in the same order whatever
// M is (batch invariance).
#include "lib/common.wgsl"

override BITS: u32 = 4;
override GS: u32 = 64;
const TM: u32 = {{TM}}u;     // rows per lane: 4 or 8
const BM: u32 = 16u * TM;
#if TN8
const BN: u32 = 128u;        // columns tx·4.. and 64 + tx·4.. per lane (conflict-free vec4 reads)
#else
const BN: u32 = 64u;
#endif
const BK: u32 = 32u;

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
@group(0) @binding(2) var<storage, read> w: array<u32>;
#ifndef WF16
#ifndef WBF16
#define QUANT
@group(0) @binding(3) var<storage, read> scales: array<u32>;
@group(0) @binding(4) var<storage, read> biases: array<u32>;
#endif
#endif
#ifdef BIAS
@group(0) @binding(5) var<storage, read> bias: array<f32>;
#endif
#ifdef OUT_F32
@group(0) @binding(6) var<storage, read_write> y: array<f32>;
#elif ADD
@group(0) @binding(6) var<storage, read_write> y: array<f32>;
#else
@group(0) @binding(6) var<storage, read_write> y: array<act>;
#endif

var<workgroup> xs: array<vec4<f32>, BK * BM / 4u>;  // [k][m/4]
var<workgroup> ws: array<vec4<f32>, BK * BN / 4u>;  // [k][n/4]

// One 16-bit float (bf16, or f16 with SCALE_F16) held in the low half of a word.
fn half16(h: u32) -> f32 {
#ifdef SCALE_F16
  return unpack2x16float(h).x;
#else
  return bitcast<f32>(h << 16u);
#endif
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let n0 = wid.x * BN;
  let m0 = wid.y * BM;
  let tx = lid % 16u;
  let ty = lid / 16u;
  let K = params.K;
  var acc0 = vec4<f32>(0.0); var acc1 = vec4<f32>(0.0); var acc2 = vec4<f32>(0.0); var acc3 = vec4<f32>(0.0);
#if TM8
  var acc4 = vec4<f32>(0.0); var acc5 = vec4<f32>(0.0); var acc6 = vec4<f32>(0.0); var acc7 = vec4<f32>(0.0);
#endif
#if TN8
  var acc8 = vec4<f32>(0.0); var acc9 = vec4<f32>(0.0); var acc10 = vec4<f32>(0.0); var acc11 = vec4<f32>(0.0);
  var acc12 = vec4<f32>(0.0); var acc13 = vec4<f32>(0.0); var acc14 = vec4<f32>(0.0); var acc15 = vec4<f32>(0.0);
#endif

  // Staging tasks: lanes [0, BM) own x (4 rows × 8 k), lanes [BM, BM + BN) own W (4 rows × 8 k).
  let xt = lid < BM;
  let wt = lid >= BM && lid < BM + BN;
  let tsk = select(lid - BM, lid, xt);
  let r4 = tsk / 4u;   // group of 4 rows
  let c = tsk % 4u;    // chunk of 8 k

  var rx: array<vec4<u32>, 4>;   // x rows: values 0-3 as f32 bits (4-7 in rx2)
  var rx2: array<vec4<u32>, 4>;
  var rw: array<vec4<u32>, 4>;   // W rows: up to 3 words in xyz, packed scale|bias (16-bit each) in w

  for (var k0 = 0u; k0 < K + BK; k0 += BK) {
    // 1. Store the tile fetched in the previous iteration.
    if (k0 > 0u) {
      let kt = k0 - BK;
      if (xt) {
        for (var e = 0u; e < 8u; e++) {
          var v: vec4<f32>;
          if (e < 4u) {
            v = bitcast<vec4<f32>>(vec4<u32>(rx[0][e], rx[1][e], rx[2][e], rx[3][e]));
          } else {
            v = bitcast<vec4<f32>>(vec4<u32>(rx2[0][e - 4u], rx2[1][e - 4u], rx2[2][e - 4u], rx2[3][e - 4u]));
          }
          xs[(c * 8u + e) * (BM / 4u) + r4] = v;
        }
      }
      if (wt) {
        var vals: array<vec4<f32>, 8>;   // vals[e][row]
        for (var i = 0u; i < 4u; i++) {
          let kk = kt + c * 8u;
#ifdef QUANT
          let s = half16(rw[i].w & 0xffffu);
          let b = half16(rw[i].w >> 16u);
          let off = (kk * BITS) & 31u;
          for (var e = 0u; e < 8u; e++) {
            let bit = off + e * BITS;
            let sh = bit & 31u;
            var v = rw[i][bit >> 5u] >> sh;
            if (sh + BITS > 32u) { v = v | (rw[i][(bit >> 5u) + 1u] << (32u - sh)); }
            vals[e][i] = s * f32(v & ((1u << BITS) - 1u)) + b;
          }
#else
          for (var e = 0u; e < 4u; e++) {
            let u = rw[i][e];
#ifdef WF16
            let h = unpack2x16float(u);
#else
            let h = vec2<f32>(bf16_lo(u), bf16_hi(u));
#endif
            vals[2u * e][i] = h.x;
            vals[2u * e + 1u][i] = h.y;
          }
#endif
        }
        for (var e = 0u; e < 8u; e++) { ws[(c * 8u + e) * (BN / 4u) + r4] = vals[e]; }
      }
    }
    workgroupBarrier();
    // 2. Prefetch the next tile's raw words into registers (overlaps the multiply below).
    if (k0 < K) {
      if (xt) {
        for (var i = 0u; i < 4u; i++) {
          let m = min(m0 + r4 * 4u + i, params.M - 1u);
          let e = (params.row0 + m) * K + k0 + c * 8u;
          rx[i] = bitcast<vec4<u32>>(x[e / 4u]);
          rx2[i] = bitcast<vec4<u32>>(x[e / 4u + 1u]);
        }
      }
      if (wt) {
        for (var i = 0u; i < 4u; i++) {
          let n = min(n0 + r4 * 4u + i, params.N - 1u);
          let kk = k0 + c * 8u;
#ifdef QUANT
          let wb = n * (K * BITS / 32u) + ((kk * BITS) >> 5u);
          let gi = n * (K / GS) + kk / GS;
          let sw = scales[gi >> 1u];
          let bw = biases[gi >> 1u];
          // Keep this value's 16-bit scale in the low half and bias in the high half.
          let sh = (gi & 1u) * 16u;
          let sb = ((sw >> sh) & 0xffffu) | (((bw >> sh) & 0xffffu) << 16u);
          rw[i] = vec4<u32>(w[wb], w[wb + 1u], w[wb + 2u], sb);
#else
          let base = (n * K + kk) >> 1u;
          // 16-bit K need only be a multiple of 8: W past K is zero (x there is finite), so the tail adds 0.
          rw[i] = select(vec4<u32>(0u), vec4<u32>(w[base], w[base + 1u], w[base + 2u], w[base + 3u]), kk < K);
#endif
        }
      }
    }
    // 3. Multiply the staged tile.
    if (k0 > 0u) {
      for (var kk = 0u; kk < BK; kk++) {
        let b = ws[kk * (BN / 4u) + tx];
        let a0 = xs[kk * (BM / 4u) + ty * (TM / 4u)];
        acc0 = fma(vec4<f32>(a0.x), b, acc0);
        acc1 = fma(vec4<f32>(a0.y), b, acc1);
        acc2 = fma(vec4<f32>(a0.z), b, acc2);
        acc3 = fma(vec4<f32>(a0.w), b, acc3);
#if TM8
        let a1 = xs[kk * (BM / 4u) + ty * 2u + 1u];
        acc4 = fma(vec4<f32>(a1.x), b, acc4);
        acc5 = fma(vec4<f32>(a1.y), b, acc5);
        acc6 = fma(vec4<f32>(a1.z), b, acc6);
        acc7 = fma(vec4<f32>(a1.w), b, acc7);
#endif
#if TN8
        let b2 = ws[kk * (BN / 4u) + 16u + tx];
        acc8 = fma(vec4<f32>(a0.x), b2, acc8);
        acc9 = fma(vec4<f32>(a0.y), b2, acc9);
        acc10 = fma(vec4<f32>(a0.z), b2, acc10);
        acc11 = fma(vec4<f32>(a0.w), b2, acc11);
        acc12 = fma(vec4<f32>(a1.x), b2, acc12);
        acc13 = fma(vec4<f32>(a1.y), b2, acc13);
        acc14 = fma(vec4<f32>(a1.z), b2, acc14);
        acc15 = fma(vec4<f32>(a1.w), b2, acc15);
#endif
      }
    }
    workgroupBarrier();
  }

#if TM8
  var accs = array<vec4<f32>, TM>(acc0, acc1, acc2, acc3, acc4, acc5, acc6, acc7);
#else
  var accs = array<vec4<f32>, TM>(acc0, acc1, acc2, acc3);
#endif
  store(m0 + ty * TM, n0 + tx * 4u, accs);
#if TN8
  store(m0 + ty * TM, n0 + 64u + tx * 4u, array<vec4<f32>, TM>(acc8, acc9, acc10, acc11, acc12, acc13, acc14, acc15));
#endif
}

// Writes a TM×4 block of outputs at (m, n) with the epilogue.
fn store(mb: u32, nb: u32, accs: array<vec4<f32>, TM>) {
  for (var i = 0u; i < TM; i++) {
    let m = mb + i;
    if (m >= params.M) { break; }
    for (var j = 0u; j < 4u; j++) {
      let n = nb + j;
      if (n >= params.N) { break; }
      var v = accs[i][j];
#ifdef BIAS
      v += bias[n];
#endif
      let yi = (params.row0 + m) * params.ldy + params.n_off + n;
#ifdef ADD
      y[yi] = y[yi] + v;
#elif OUT_F32
      y[yi] = v;
#else
      y[yi] = act(v);
#endif
    }
  }
}
