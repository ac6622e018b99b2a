// Tiled matmul for many rows (prefill chunks), compute-bound:
//   y[row0 + m, n_off + n] (=|+=) Σ_k x[row0 + m, k] · W[n, k] (+ bias[n])      m < M, n < N
// Same weight formats, epilogues and bindings as matmul_vec.wgsl (w read as plain u32 words here).
// Grid: (ceil(N / BN), ceil(M / BM)) with BM = 16·TM, BN = 16·TN. 256 lanes (16×16) own one BM×BN tile,
// each lane a TM×TN block (rows ty·TM.., columns tx·TN..). K is walked in tiles of BK = 32 values (one
// quant unit): the x tile and the W tile, dequantized once per tile by whole words, are staged in workgroup
// memory (f32, k-major so the inner loop reads vec4s). Each output is a sequential sum over k in the same
// order whatever M is (batch invariance).
#include "lib/common.wgsl"

override BITS: u32 = 4;
override GS: u32 = 64;
const TM: u32 = {{TM}}u;     // rows per lane (multiple of 4)
const TN: u32 = {{TN}}u;     // columns per lane (multiple of 4)
const BM: u32 = 16u * TM;
const BN: u32 = 16u * TN;
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
#ifdef F16
@group(0) @binding(1) var<storage, read> x: array<vec4<u32>>;   // 8 halves per load
#else
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
#endif
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

var<workgroup> xs: array<vec4<f32>, BK * BM / 4u>;  // [k][m]
var<workgroup> ws: array<vec4<f32>, BK * BN / 4u>;  // [k][n]

fn half_at(word: u32, idx: u32) -> f32 {
#ifdef SCALE_F16
  return unpack2x16float(word)[idx & 1u];
#else
  return select(bf16_lo(word), bf16_hi(word), (idx & 1u) == 1u);
#endif
}

fn xs_set(k: u32, m: u32, v: f32) {
  xs[(k * BM + m) / 4u][m % 4u] = v;
}
fn ws_set(k: u32, n: u32, v: f32) {
  ws[(k * BN + n) / 4u][n % 4u] = v;
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let n0 = wid.x * BN;
  let m0 = wid.y * BM;
  let tx = lid % 16u;
  let ty = lid / 16u;
  let K = params.K;
  var acc: array<array<f32, TN>, TM>;
  for (var i = 0u; i < TM; i++) { for (var j = 0u; j < TN; j++) { acc[i][j] = 0.0; } }

  for (var k0 = 0u; k0 < K; k0 += BK) {
    // x tile: BM rows × 4 chunks of 8 values; 4 consecutive lanes read one row's 32 values.
    for (var t = lid; t < BM * 4u; t += 256u) {
      let r = t / 4u;
      let c = t % 4u;
      let m = min(m0 + r, params.M - 1u);
      let e = (params.row0 + m) * K + k0 + c * 8u;
#ifdef F16
      let v = x[e / 8u];
      for (var q = 0u; q < 4u; q++) {
        let h = unpack2x16float(v[q]);
        xs_set(c * 8u + 2u * q, r, h.x);
        xs_set(c * 8u + 2u * q + 1u, r, h.y);
      }
#else
      let a = x[e / 4u];
      let b = x[e / 4u + 1u];
      for (var q = 0u; q < 4u; q++) {
        xs_set(c * 8u + q, r, a[q]);
        xs_set(c * 8u + 4u + q, r, b[q]);
      }
#endif
    }
    // W tile: BN rows × 32 values, 8 values per lane-step (consecutive lanes on consecutive rows).
    for (var t = lid; t < BN * 4u; t += 256u) {
      let r = t % BN;
      let c = t / BN;
      let n = min(n0 + r, params.N - 1u);
      let kk = k0 + c * 8u;
#ifdef QUANT
      let gi = n * (K / GS) + kk / GS;
      let s = half_at(scales[gi >> 1u], gi);
      let b = half_at(biases[gi >> 1u], gi);
      // The 8 values span at most 3 words: load them once, extract from registers.
      let bit0 = kk * BITS;
      let wb = n * (K * BITS / 32u) + (bit0 >> 5u);
      var wv = array<u32, 3>(w[wb], w[wb + 1u], w[wb + 2u]);
      let off = bit0 & 31u;
      for (var e = 0u; e < 8u; e++) {
        let bit = off + e * BITS;
        let sh = bit & 31u;
        var v = wv[bit >> 5u] >> sh;
        if (sh + BITS > 32u) { v = v | (wv[(bit >> 5u) + 1u] << (32u - sh)); }
        ws_set(c * 8u + e, r, s * f32(v & ((1u << BITS) - 1u)) + b);
      }
#else
      let base = (n * K + kk) >> 1u;
      for (var e = 0u; e < 4u; e++) {
        // 16-bit K need only be a multiple of 8: W past K is zero (x there is finite), so the tail adds 0.
        let u = select(0u, w[base + e], kk < K);
#ifdef WF16
        let h = unpack2x16float(u);
        ws_set(c * 8u + 2u * e, r, h.x);
        ws_set(c * 8u + 2u * e + 1u, r, h.y);
#else
        ws_set(c * 8u + 2u * e, r, bf16_lo(u));
        ws_set(c * 8u + 2u * e + 1u, r, bf16_hi(u));
#endif
      }
#endif
    }
    workgroupBarrier();
    for (var kk = 0u; kk < BK; kk++) {
      var a: array<vec4<f32>, TM / 4u>;
      var b: array<vec4<f32>, TN / 4u>;
      for (var i = 0u; i < TM / 4u; i++) { a[i] = xs[(kk * BM + ty * TM) / 4u + i]; }
      for (var j = 0u; j < TN / 4u; j++) { b[j] = ws[(kk * BN + tx * TN) / 4u + j]; }
      for (var i = 0u; i < TM; i++) {
        let av = a[i / 4u][i % 4u];
        for (var j = 0u; j < TN; j++) { acc[i][j] = fma(av, b[j / 4u][j % 4u], acc[i][j]); }
      }
    }
    workgroupBarrier();
  }

  for (var i = 0u; i < TM; i++) {
    let m = m0 + ty * TM + i;
    if (m >= params.M) { break; }
    for (var j = 0u; j < TN; j++) {
      let n = n0 + tx * TN + j;
      if (n >= params.N) { break; }
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
