// Tiled matmul for many rows (prefill chunks), compute-bound:
//   y[row0 + m, n_off + n] (=|+=) Σ_k x[row0 + m, k] · W[n, k] (+ bias[n])      m < M, n < N
// Same weight formats, epilogues and bindings as matmul_vec.wgsl (x f32; w read as plain u32 words here).
// Grid: (ceil(N / BN), ceil(M / 128)), BN = 64, or 128 under WIDE_TILE. 256 lanes (16×16) own one 128×BN
// tile, each lane 8×4 (WIDE_TILE: 8×8) outputs held in named vec4 accumulators (arrays indexed in loops can
// spill to local memory).
// K is walked in tiles of 32 values (one quant unit): the x tile and the W tile, dequantized once per tile,
// are staged in workgroup memory as k-major vec4s; the next tile's raw words are prefetched into registers
// while the current one is multiplied. Each output is a sequential sum over k in the same order whatever
// M is (batch invariance).
#include "lib/common.wgsl"

override BITS: u32 = 4;
override GS: u32 = 64;
const TM: u32 = 8u;          // rows per lane
const BM: u32 = 16u * TM;
// WIDE_TILE (matrices with N ≥ the profile's wideN): twice the outputs per staged tile.
#ifdef WIDE_TILE
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

#include "lib/matmul.wgsl"

var<workgroup> xs: array<vec4<f32>, BK * BM / 4u>;  // [k][m/4]
var<workgroup> ws: array<vec4<f32>, BK * BN / 4u>;  // [k][n/4]

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let n0 = wid.x * BN;
  let m0 = wid.y * BM;
  let tx = lid % 16u;
  let ty = lid / 16u;
  let K = params.K;
  var acc0 = vec4<f32>(0.0); var acc1 = vec4<f32>(0.0); var acc2 = vec4<f32>(0.0); var acc3 = vec4<f32>(0.0);
  var acc4 = vec4<f32>(0.0); var acc5 = vec4<f32>(0.0); var acc6 = vec4<f32>(0.0); var acc7 = vec4<f32>(0.0);
#ifdef WIDE_TILE
  var acc8 = vec4<f32>(0.0); var acc9 = vec4<f32>(0.0);
  var acc10 = vec4<f32>(0.0); var acc11 = vec4<f32>(0.0);
  var acc12 = vec4<f32>(0.0); var acc13 = vec4<f32>(0.0);
  var acc14 = vec4<f32>(0.0); var acc15 = vec4<f32>(0.0);
#endif

  // Staging tasks: lanes [0, BM) own x (4 rows × 8 k), lanes [BM, BM + BN) own W (4 rows × 8 k).
  let xt = lid < BM;
  let wt = lid >= BM && lid < BM + BN;
  let tsk = select(lid - BM, lid, xt);
  let r4 = tsk / 4u;   // group of 4 rows
  let c = tsk % 4u;    // chunk of 8 k

  // Staged values in flight, named (arrays indexed in loops end up in local memory): x rows r4·4 + i,
  // k values 0-3 in xa_i and 4-7 in xb_i; W rows as raw words plus packed scale|bias (16-bit each).
  var xa0 = vec4<f32>(0.0); var xa1 = vec4<f32>(0.0); var xa2 = vec4<f32>(0.0); var xa3 = vec4<f32>(0.0);
  var xb0 = vec4<f32>(0.0); var xb1 = vec4<f32>(0.0); var xb2 = vec4<f32>(0.0); var xb3 = vec4<f32>(0.0);
#ifdef Q4
  var wq = vec4<u32>(0u);    // 4-bit: the one word holding this chunk's 8 values, for each of the 4 rows
  var wsb = vec4<u32>(0u);   // scale (low half) | bias (high half) of each row's group
#else
  var rw: array<vec4<u32>, 4>;   // W rows: up to 3 words in xyz, packed scale|bias (16-bit each) in w
#endif

  for (var k0 = 0u; k0 < K + BK; k0 += BK) {
    // 1. Store the tile fetched in the previous iteration.
    if (k0 > 0u) {
      let kt = k0 - BK;
      if (xt) {
        let xo = c * 8u * (BM / 4u) + r4;
        xs[xo] = vec4<f32>(xa0.x, xa1.x, xa2.x, xa3.x);
        xs[xo + (BM / 4u)] = vec4<f32>(xa0.y, xa1.y, xa2.y, xa3.y);
        xs[xo + 2u * (BM / 4u)] = vec4<f32>(xa0.z, xa1.z, xa2.z, xa3.z);
        xs[xo + 3u * (BM / 4u)] = vec4<f32>(xa0.w, xa1.w, xa2.w, xa3.w);
        xs[xo + 4u * (BM / 4u)] = vec4<f32>(xb0.x, xb1.x, xb2.x, xb3.x);
        xs[xo + 5u * (BM / 4u)] = vec4<f32>(xb0.y, xb1.y, xb2.y, xb3.y);
        xs[xo + 6u * (BM / 4u)] = vec4<f32>(xb0.z, xb1.z, xb2.z, xb3.z);
        xs[xo + 7u * (BM / 4u)] = vec4<f32>(xb0.w, xb1.w, xb2.w, xb3.w);
      }
      if (wt) {
#ifdef Q4
        // 4 rows at once: w = scale·q + bias, q by the 2^23 mantissa trick (no int→float conversion).
        let s4 = vec4<f32>(half16(wsb.x & 0xffffu), half16(wsb.y & 0xffffu), half16(wsb.z & 0xffffu),
                           half16(wsb.w & 0xffffu));
        let b4 = vec4<f32>(half16(wsb.x >> 16u), half16(wsb.y >> 16u), half16(wsb.z >> 16u),
                           half16(wsb.w >> 16u));
        let wo = c * 8u * (BN / 4u) + r4;
        for (var e = 0u; e < 8u; e++) {
          let q = bitcast<vec4<f32>>(((wq >> vec4<u32>(4u * e)) & vec4<u32>(15u)) | vec4<u32>(0x4b000000u)) -
                  vec4<f32>(8388608.0);
          ws[wo + e * (BN / 4u)] = fma(s4, q, b4);
        }
#else
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
#endif
      }
    }
    workgroupBarrier();
    // 2. Prefetch the next tile's raw values into registers (overlaps the multiply below).
    if (k0 < K) {
      if (xt) {
        let mb = m0 + r4 * 4u;
        let xk = k0 + c * 8u;
        let e0 = (params.row0 + min(mb, params.M - 1u)) * K + xk;
        let e1 = (params.row0 + min(mb + 1u, params.M - 1u)) * K + xk;
        let e2 = (params.row0 + min(mb + 2u, params.M - 1u)) * K + xk;
        let e3 = (params.row0 + min(mb + 3u, params.M - 1u)) * K + xk;
        xa0 = x[e0 / 4u]; xb0 = x[e0 / 4u + 1u];
        xa1 = x[e1 / 4u]; xb1 = x[e1 / 4u + 1u];
        xa2 = x[e2 / 4u]; xb2 = x[e2 / 4u + 1u];
        xa3 = x[e3 / 4u]; xb3 = x[e3 / 4u + 1u];
      }
      if (wt) {
#ifdef Q4
        let kk = k0 + c * 8u;
        let nb = n0 + r4 * 4u;
        let na = vec4<u32>(min(nb, params.N - 1u), min(nb + 1u, params.N - 1u), min(nb + 2u, params.N - 1u),
                           min(nb + 3u, params.N - 1u));
        let wpr = K / 8u;
        let wi = na * wpr + vec4<u32>(kk / 8u);
        wq = vec4<u32>(w[wi.x], w[wi.y], w[wi.z], w[wi.w]);
        let gi = na * (K / GS) + vec4<u32>(kk / GS);
        let sh = (gi & vec4<u32>(1u)) * 16u;
        let sw = vec4<u32>(scales[gi.x >> 1u], scales[gi.y >> 1u], scales[gi.z >> 1u], scales[gi.w >> 1u]);
        let bw = vec4<u32>(biases[gi.x >> 1u], biases[gi.y >> 1u], biases[gi.z >> 1u], biases[gi.w >> 1u]);
        wsb = ((sw >> sh) & vec4<u32>(0xffffu)) | (((bw >> sh) & vec4<u32>(0xffffu)) << vec4<u32>(16u));
#else
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
#endif
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
        let a1 = xs[kk * (BM / 4u) + ty * 2u + 1u];
        acc4 = fma(vec4<f32>(a1.x), b, acc4);
        acc5 = fma(vec4<f32>(a1.y), b, acc5);
        acc6 = fma(vec4<f32>(a1.z), b, acc6);
        acc7 = fma(vec4<f32>(a1.w), b, acc7);
#ifdef WIDE_TILE
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

  var accs = array<vec4<f32>, TM>(acc0, acc1, acc2, acc3, acc4, acc5, acc6, acc7);
  store_block(m0 + ty * TM, n0 + tx * 4u, accs);
#ifdef WIDE_TILE
  store_block(m0 + ty * TM, n0 + 64u + tx * 4u,
              array<vec4<f32>, TM>(acc8, acc9, acc10, acc11, acc12, acc13, acc14, acc15));
#endif
}

// Writes a TM×4 block of outputs at (m, n) with the epilogue.
fn store_block(mb: u32, nb: u32, accs: array<vec4<f32>, TM>) {
  for (var i = 0u; i < TM; i++) {
    let m = mb + i;
    if (m >= params.M) { break; }
    for (var j = 0u; j < 4u; j++) {
      let n = nb + j;
      if (n >= params.N) { break; }
      store(params.row0 + m, n, accs[i][j]);
    }
  }
}
