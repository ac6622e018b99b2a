// Tiled matmul for many rows (prefill chunks), compute-bound:
//   y[row0 + m, n_off + n] (=|+=) Σ_k x[row0 + m, k] · W[n, k] (+ bias[n])      m < M, n < N
// Same weight formats, epilogues and bindings as matmul_vec.wgsl (w read as plain u32 here).
// Grid: (ceil(N / BN), ceil(M / BM)), BM = BN = 16·TM. Each workgroup of 256 lanes (16×16) owns one
// BM×BN tile; each lane TM×TM outputs, strided by 16 so shared-memory reads are conflict-free. K is walked in
// tiles of BK = 32 values (one quant unit): the x tile and the dequantized W tile are staged in workgroup
// memory (f32, k-major). Each output is a sequential sum over k, the same whatever M is (batch invariance).
#include "lib/common.wgsl"

override BITS: u32 = 4;
override GS: u32 = 64;
const TM: u32 = {{TM}}u;     // outputs per lane along each axis
const BM: u32 = 16u * TM;
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
@group(0) @binding(1) var<storage, read> x: array<act4>;
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

var<workgroup> xs: array<f32, BK * BM>;  // [k][m]
var<workgroup> ws: array<f32, BK * BM>;  // [k][n]

fn half_at(word: u32, idx: u32) -> f32 {
#ifdef SCALE_F16
  return unpack2x16float(word)[idx & 1u];
#else
  return select(bf16_lo(word), bf16_hi(word), (idx & 1u) == 1u);
#endif
}

// W[n, k .. k+7] as f32 (k a multiple of 8, n < N).
fn load_w8(n: u32, k: u32) -> array<f32, 8> {
  var r: array<f32, 8>;
  let K = params.K;
#ifdef QUANT
  let gi = n * (K / GS) + k / GS;
  let s = half_at(scales[gi >> 1u], gi);
  let b = half_at(biases[gi >> 1u], gi);
  let rowword = n * (K * BITS / 32u);
  for (var e = 0u; e < 8u; e++) {
    let bit = (k + e) * BITS;
    let sh = bit & 31u;
    let wi = rowword + (bit >> 5u);
    var v = w[wi] >> sh;
    if (sh + BITS > 32u) { v = v | (w[wi + 1u] << (32u - sh)); }
    r[e] = s * f32(v & ((1u << BITS) - 1u)) + b;
  }
#else
  let base = (n * K + k) >> 1u;
  for (var e = 0u; e < 4u; e++) {
    let u = w[base + e];
#ifdef WF16
    let h = unpack2x16float(u);
    r[2u * e] = h.x;
    r[2u * e + 1u] = h.y;
#else
    r[2u * e] = bf16_lo(u);
    r[2u * e + 1u] = bf16_hi(u);
#endif
  }
#endif
  return r;
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let n0 = wid.x * BM;
  let m0 = wid.y * BM;
  let tx = lid % 16u;
  let ty = lid / 16u;
  let K = params.K;
  var acc: array<array<f32, TM>, TM>;
  for (var i = 0u; i < TM; i++) { for (var j = 0u; j < TM; j++) { acc[i][j] = 0.0; } }

  for (var k0 = 0u; k0 < K; k0 += BK) {
    // Stage BM rows × 4 eighths of the k-tile, for x and for W.
    for (var t = lid; t < BM * 4u; t += 256u) {
      let r = t / 4u;
      let e8 = (t % 4u) * 8u;
      // x: 8 values = 2 vec4
      let m = min(m0 + r, params.M - 1u);
      let xb = ((params.row0 + m) * K + k0 + e8) / 4u;
      let xa = vec4<f32>(x[xb]);
      let xc = vec4<f32>(x[xb + 1u]);
      for (var e = 0u; e < 4u; e++) {
        xs[(e8 + e) * BM + r] = xa[e];
        xs[(e8 + 4u + e) * BM + r] = xc[e];
      }
      let n = min(n0 + r, params.N - 1u);
      let wv = load_w8(n, k0 + e8);
      for (var e = 0u; e < 8u; e++) { ws[(e8 + e) * BM + r] = wv[e]; }
    }
    workgroupBarrier();
    for (var kk = 0u; kk < BK; kk++) {
      var a: array<f32, TM>;
      var b: array<f32, TM>;
      for (var i = 0u; i < TM; i++) {
        a[i] = xs[kk * BM + ty + 16u * i];
        b[i] = ws[kk * BM + tx + 16u * i];
      }
      for (var i = 0u; i < TM; i++) {
        for (var j = 0u; j < TM; j++) { acc[i][j] = fma(a[i], b[j], acc[i][j]); }
      }
    }
    workgroupBarrier();
  }

  for (var i = 0u; i < TM; i++) {
    let m = m0 + ty + 16u * i;
    if (m >= params.M) { continue; }
    for (var j = 0u; j < TM; j++) {
      let n = n0 + tx + 16u * j;
      if (n >= params.N) { continue; }
      var v = acc[i][j];
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
