// Tiled matmul for many rows (prefill chunks) with int8 x and 4-bit weights, on integer dot products:
//   y[row0 + m, n_off + n] (=|+=) Σ_k x[row0 + m, k] · W[n, k] (+ bias[n])      m < M, n < N
// W: MLX affine 4-bit (w = scale·q + bias per group of GS ≥ 32 along K). x is quantized per row per 32 values
// by lib/x8.wgsl, as decode rows are (sx = max|x|/127, q = round(x/sx) as int8, Σx kept in f32), so each
// output adds, per 32-value chunk, scale·sx·Σ q_w·q_x + bias·Σx: the Σ is exact in i32, four products per
// dot4I8Packed, eight of them chained per output and summed into a float's mantissa (d16).
// Same bindings and epilogues as matmul_tiled.wgsl (no fused norm: prefill rows are normalised before).
// Bindings:  x (rows, K) f32;  w (N, K/8) u32;  scales, biases (N, K/GS) 16-bit packed in u32;
//            bias (N) f32 (BIAS);  y (rows, ldy) act | f32, or under SPLITK part (splits, M, N) f32
// Grid: (ceil(N / BN), ceil(M / 64), splits), BN = 128, or 64 under NARROW_TILE. 256 lanes (NARROW_TILE: 128)
// own a 64×BN tile: lane (tx, ty) = (lid % TX, lid / TX), TX = BN / 8, computes rows ty·4 .. ty·4+3 and
// columns tx + TX·j (j < 8: neighbouring lanes read neighbouring columns from workgroup memory, and write
// neighbouring outputs).
// NARROW_TILE halves the tile for narrow matrices, whose 128-wide grid would fill the GPU only ~1.2 times
// (N = 2560 at 512 rows: 160 workgroups); each lane keeps the same 4×8 outputs and stages two rows of x
// instead of one. K is walked in stages of two 32-value sub-tiles; narrow tiles fetch the next stage's raw x
// and W words into registers while the current one is multiplied, wide ones fetch them right before storing
// them (fewer live registers, so more workgroups per SM hide the latency). Same float ops in the same order.
// SPLITK (grid z = splits): workgroup z sums k in [z·kc, min((z+1)·kc, K)) only and writes that partial,
// unscaled, to y = part (splits, M, N) f32 (host: OUT_F32, no BIAS, ldy = N, n_off = 0);
// matmul_splitk.wgsl then adds the splits in order and applies the epilogue. Narrow matrices take it at
// every M (the split depends on K only), so a row's bits still do not depend on M.
// Workgroup memory per sub-tile: x as int8 (two vec4<u32> per row: the even- and odd-position values of each
// 8-value word, the order in which (w & 0x0f0f0f0f) and (w >> 4) & 0x0f0f0f0f hold the nibbles), (sx, Σx)
// per row; W as int8 the same way, (scale, bias) per column.
// Each output is a sum over the K tiles in order whatever M is, and x's quantization depends on its row only
// (batch invariance).
#include "lib/common.wgsl"
#include "lib/x8.wgsl"

override BITS: u32 = 4;
override GS: u32 = 64;
const BM: u32 = 64u;
// NARROW_TILE (narrow matrices whose 128-column grid would be small): 64-column tiles, next stage prefetched.
#ifdef NARROW_TILE
const BN: u32 = 64u;
const WGS: u32 = 128u;
#else
const BN: u32 = 128u;
const WGS: u32 = 256u;
#endif
const TX: u32 = BN / 8u;   // lanes across a tile's columns

struct Params {
  M: u32,      // rows
  N: u32,      // output columns held by this weight buffer
  K: u32,      // reduction length (elements)
  row0: u32,   // first row of x and y used (rows)
  ldy: u32,    // row stride of y (elements)
  n_off: u32,  // column of y where this weight's output starts (elements)
#ifdef SPLITK
  kc: u32,     // k per split (a multiple of 64)
#endif
}
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> w: array<u32>;
@group(0) @binding(3) var<storage, read> scales: array<u32>;
@group(0) @binding(4) var<storage, read> biases: array<u32>;

#include "lib/matmul.wgsl"

// Two 32-value sub-tiles per stage (sub-tile t at index t·BM + row, t·BN + column): half the barriers, and
// the next stage's loads are in flight over twice the multiply.
const KS: u32 = 2u;
var<workgroup> xlo: array<vec4<u32>, BM * KS>;   // values 0-15 of each row's tile (words 0, 1: even, odd)
var<workgroup> xhi: array<vec4<u32>, BM * KS>;   // values 16-31
var<workgroup> xsc: array<vec2<f32>, BM * KS>;   // (sx, Σx)
var<workgroup> wlo: array<vec4<u32>, BN * KS>;
var<workgroup> whi: array<vec4<u32>, BN * KS>;
var<workgroup> wsb: array<vec2<f32>, BN * KS>;   // (scale, bias)

// A lane's 4 rows of the staged x tile, read once per tile.
struct Rows { l0: vec4<u32>, h0: vec4<u32>, l1: vec4<u32>, h1: vec4<u32>, l2: vec4<u32>, h2: vec4<u32>,
              l3: vec4<u32>, h3: vec4<u32>, sx: vec4<f32>, sum: vec4<f32> }

fn rows4(r: u32) -> Rows {
  let q0 = xsc[r];
  let q1 = xsc[r + 1u];
  let q2 = xsc[r + 2u];
  let q3 = xsc[r + 3u];
  return Rows(xlo[r], xhi[r], xlo[r + 1u], xhi[r + 1u], xlo[r + 2u], xhi[r + 2u], xlo[r + 3u], xhi[r + 3u],
              vec4<f32>(q0.x, q1.x, q2.x, q3.x), vec4<f32>(q0.y, q1.y, q2.y, q3.y));
}

// Each row's eight dot products as one chain started from the bits of 1.5·2^23, so every add can be a dot
// product's own accumulate and the sum lands in the mantissa of 2^23 (|Σ| ≤ 32·15·127 < 2^22): the i32 → f32
// is one exact subtraction, and the scale and bias go into the accumulator by two FMAs.
fn d16(lo: vec4<u32>, x0: vec4<u32>, hi: vec4<u32>, x1: vec4<u32>) -> i32 {
  return dot4I8Packed(hi.w, x1.w) + (dot4I8Packed(hi.z, x1.z) + (dot4I8Packed(hi.y, x1.y) +
         (dot4I8Packed(hi.x, x1.x) + (dot4I8Packed(lo.w, x0.w) + (dot4I8Packed(lo.z, x0.z) +
         (dot4I8Packed(lo.y, x0.y) + (dot4I8Packed(lo.x, x0.x) + 0x4b400000)))))));
}
fn col4(c: u32, x4: Rows, acc: vec4<f32>) -> vec4<f32> {
  let lo = wlo[c];
  let hi = whi[c];
  let sb = wsb[c];
  let s = vec4<i32>(d16(lo, x4.l0, hi, x4.h0), d16(lo, x4.l1, hi, x4.h1), d16(lo, x4.l2, hi, x4.h2),
                    d16(lo, x4.l3, hi, x4.h3));
  return fma(sb.x * x4.sx, bitcast<vec4<f32>>(s) - vec4<f32>(12582912.0), fma(vec4<f32>(sb.y), x4.sum, acc));
}

// Quantizes a row's fetched 32 values (4 lanes × 8) into the x tile; every lane calls it (shuffles).
fn stage_x(r: u32, xq: u32, a: vec4<f32>, b: vec4<f32>) {
  let g = x8_group(a, b);
  if (xq == 0u) { xlo[r] = g.w; xsc[r] = vec2<f32>(g.sx, g.sum); }
  if (xq == 2u) { xhi[r] = g.w; }
}

// The raw values one lane fetches for one 32-value sub-tile: 8 x values of its row (NARROW_TILE: of two
// rows), two words of its W column, and (lane wh = 0) the column's raw scale and bias words.
struct Fetch {
  xa: vec4<f32>, xb: vec4<f32>, xc: vec4<f32>, xd: vec4<f32>,
  w: vec2<u32>, sw: u32, bw: u32, gi: u32,
}

fn fetch(k0: u32, xrow: u32, xrow2: u32, xq: u32, wn: u32, wh: u32) -> Fetch {
  var f: Fetch;
  let K = params.K;
  let xo = (xrow * K + k0) / 4u + 2u * xq;
  f.xa = x[xo];
  f.xb = x[xo + 1u];
#ifdef NARROW_TILE
  let xo2 = (xrow2 * K + k0) / 4u + 2u * xq;
  f.xc = x[xo2];
  f.xd = x[xo2 + 1u];
#endif
  let wo = wn * (K / 8u) + k0 / 8u + 2u * wh;
  f.w = vec2<u32>(w[wo], w[wo + 1u]);
  f.gi = wn * (K / GS) + k0 / GS;
  if (wh == 0u) {
    f.sw = scales[f.gi >> 1u];
    f.bw = biases[f.gi >> 1u];
  }
  return f;
}

// Stores a fetched sub-tile into workgroup memory at sub-tile t.
fn stage(t: u32, f: Fetch, xr: u32, xq: u32, wc: u32, wh: u32) {
  stage_x(t * BM + xr, xq, f.xa, f.xb);
#ifdef NARROW_TILE
  stage_x(t * BM + xr + 32u, xq, f.xc, f.xd);
#endif
  stage_w(t, f, wc, wh);
}

// Stores a fetched sub-tile's W words (as int8 nibbles) and its column's (scale, bias) at sub-tile t.
fn stage_w(t: u32, f: Fetch, wc: u32, wh: u32) {
  let m4 = 0x0f0f0f0fu;
  let wv = vec4<u32>(f.w.x & m4, (f.w.x >> 4u) & m4, f.w.y & m4, (f.w.y >> 4u) & m4);
  if (wh == 0u) {
    wlo[t * BN + wc] = wv;
    let sh = (f.gi & 1u) * 16u;
    wsb[t * BN + wc] = vec2<f32>(half16((f.sw >> sh) & 0xffffu), half16((f.bw >> sh) & 0xffffu));
  } else {
    whi[t * BN + wc] = wv;
  }
}

// Accumulators: c_j holds column tx + TX·j for the lane's 4 rows (named: arrays indexed in loops spill).
struct Acc {
  c0: vec4<f32>, c1: vec4<f32>, c2: vec4<f32>, c3: vec4<f32>,
  c4: vec4<f32>, c5: vec4<f32>, c6: vec4<f32>, c7: vec4<f32>,
}

// Multiplies staged sub-tile t into the lane's outputs.
fn mul(acc: ptr<function, Acc>, t: u32, tx: u32, ty: u32) {
  let x4 = rows4(t * BM + ty * 4u);
  let c = t * BN + tx;
  (*acc).c0 = col4(c, x4, (*acc).c0);
  (*acc).c1 = col4(c + 1u * TX, x4, (*acc).c1);
  (*acc).c2 = col4(c + 2u * TX, x4, (*acc).c2);
  (*acc).c3 = col4(c + 3u * TX, x4, (*acc).c3);
  (*acc).c4 = col4(c + 4u * TX, x4, (*acc).c4);
  (*acc).c5 = col4(c + 5u * TX, x4, (*acc).c5);
  (*acc).c6 = col4(c + 6u * TX, x4, (*acc).c6);
  (*acc).c7 = col4(c + 7u * TX, x4, (*acc).c7);
}

@compute @workgroup_size(WGS)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let n0 = wid.x * BN;
  let m0 = wid.y * BM;
  let tx = lid % TX;
  let ty = lid / TX;
  let K = params.K;
#ifdef SPLITK
  let kb = wid.z * params.kc;
  let ke = min(K, kb + params.kc);
  let r0 = wid.z * params.M;   // this split's rows of part
#else
  let kb = 0u;
  let ke = K;
  let r0 = params.row0;
#endif
  var acc = Acc(vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0),
                vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0));
  // Staging: x row xr = lid / 4 (NARROW_TILE: and xr + 32), values 8·(lid % 4) .. +7 (the 4 lanes of a row
  // are adjacent: shuffles); W column wc = lid / 2, words 2·(lid % 2), +1 of the tile.
  let xr = lid / 4u;
  let xq = lid % 4u;
  let xrow = params.row0 + min(m0 + xr, params.M - 1u);
  let xrow2 = params.row0 + min(m0 + xr + 32u, params.M - 1u);
  let wc = lid / 2u;
  let wh = lid % 2u;
  let wn = min(n0 + wc, params.N - 1u);
  var f0: Fetch;
  var f1: Fetch;
#ifdef NARROW_TILE
  // Each stage: store the sub-tiles fetched the stage before, fetch the next ones, multiply the stored ones.
  for (var k0 = kb; k0 < ke + 32u * KS; k0 += 32u * KS) {
    if (k0 > kb) {
      stage(0u, f0, xr, xq, wc, wh);
      if (k0 - 32u < ke) { stage(1u, f1, xr, xq, wc, wh); }
    }
    workgroupBarrier();
    if (k0 < ke) {
      f0 = fetch(k0, xrow, xrow2, xq, wn, wh);
      if (k0 + 32u < ke) { f1 = fetch(k0 + 32u, xrow, xrow2, xq, wn, wh); }
    }
    if (k0 > kb) {
      mul(&acc, 0u, tx, ty);
      if (k0 - 32u < ke) { mul(&acc, 1u, tx, ty); }
    }
    workgroupBarrier();
  }
#else
  for (var k0 = kb; k0 < ke; k0 += 32u * KS) {
    f0 = fetch(k0, xrow, xrow2, xq, wn, wh);
    if (k0 + 32u < ke) { f1 = fetch(k0 + 32u, xrow, xrow2, xq, wn, wh); }
    stage(0u, f0, xr, xq, wc, wh);
    if (k0 + 32u < ke) { stage(1u, f1, xr, xq, wc, wh); }
    workgroupBarrier();
    mul(&acc, 0u, tx, ty);
    if (k0 + 32u < ke) { mul(&acc, 1u, tx, ty); }
    workgroupBarrier();
  }
#endif
  let mb = m0 + ty * 4u;
  store_col(r0, mb, n0 + tx, acc.c0);
  store_col(r0, mb, n0 + tx + 1u * TX, acc.c1);
  store_col(r0, mb, n0 + tx + 2u * TX, acc.c2);
  store_col(r0, mb, n0 + tx + 3u * TX, acc.c3);
  store_col(r0, mb, n0 + tx + 4u * TX, acc.c4);
  store_col(r0, mb, n0 + tx + 5u * TX, acc.c5);
  store_col(r0, mb, n0 + tx + 6u * TX, acc.c6);
  store_col(r0, mb, n0 + tx + 7u * TX, acc.c7);
}

// Writes column n of rows mb .. mb+3 (rows r0 + mb ... of y) with the epilogue.
fn store_col(r0: u32, mb: u32, n: u32, v4: vec4<f32>) {
  if (n >= params.N) { return; }
  for (var i = 0u; i < 4u; i++) {
    if (mb + i >= params.M) { break; }
    store(r0 + mb + i, n, v4[i]);
  }
}
