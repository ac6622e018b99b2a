// Grouped expert matmul for prefill rows ("tiled" mode): the step's (row, expert) pairs, grouped by expert
// by moe_group.wgsl, are multiplied in tiles of BM pairs of one expert, so an expert's weights are read once
// per tile of its pairs rather than once per pair.
//   GATE_UP: h[p, i] = silu(x_r·W_e[i]) · (x_r·W_e[I + i])    W_e (2I, K), r = p / k, i < I
//   else:    y[p, n] = h_p · W_e[n]                            W_e (N, K), x holds h (one row per pair)
// Weight formats (define): Q4, Q8 (with QUANT), WF16, WBF16; see lib/moe.wgsl.
// Bindings:  x      (rows, K) f32 (GATE_UP: the step's rows; else (pairs, K): h)
//            w      (count·N, K·bits/32) u32: expert e's row n is stack row (e − e0)·N + n
//            scales, biases (count·N, K/GS) 16-bit packed in u32 (QUANT)
//            groups (u32) counts, offsets, tile starts, order: layout in lib/moe.wgsl
//            y      (pairs, cols) f32
// Grid: (ceil(cols / BC), ceil(pairs / BM) + E), BC = 64 (GATE_UP: 64 gate rows + their 64 up rows) or
// 128 columns. Workgroup y is a tile index: its expert is found by binary search in the tile starts, its BM
// pair rows are slots offset[e] + (tile − start[e])·BM .. of `order`; workgroups past the last tile, or whose
// expert is in another shard, exit at once. 256 lanes, each 4 pair rows × 8 weight rows (16×16 lanes:
// tx·4.. and 64 + tx·4..), or under SMALL_TILE (BM = 16, experts with few pairs) 4 pair rows × 2 weight rows
// (4×64 lanes: tx and 64 + tx). K is walked in tiles of 32 as in matmul_tiled.wgsl: x and the dequantized W
// staged k-major in workgroup memory, the next tile's raw words prefetched into registers meanwhile. Each
// output is the same fma chain over k in either tile shape, whatever the pair's slot or the number of rows
// (batch invariance: the tile height may follow M).
#include "lib/common.wgsl"
#include "lib/moe.wgsl"

const BK: u32 = 32u;
const BN: u32 = 128u;   // weight rows per tile

struct Params {
  K: u32,      // reduction length (elements, a multiple of 32 and of GS)
  N: u32,      // stack rows per expert (GATE_UP: 2I)
  cols: u32,   // output columns per pair (GATE_UP: I, else N) = row stride of y
  E: u32,      // experts (sizes the sections of groups)
  e0: u32,     // first expert of this shard
  count: u32,  // experts in this shard
  kdiv: u32,   // pairs per x row (GATE_UP: k; else 1)
}
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> w: array<u32>;
#ifdef QUANT
@group(0) @binding(3) var<storage, read> scales: array<u32>;
@group(0) @binding(4) var<storage, read> biases: array<u32>;
#endif
@group(0) @binding(5) var<storage, read> groups: array<u32>;
@group(0) @binding(6) var<storage, read_write> y: array<f32>;

var<workgroup> xs: array<vec4<f32>, BK * BM / 4u>;  // [k][m/4]
var<workgroup> ws: array<vec4<f32>, BK * BN / 4u>;  // [k][n/4]

// The 16-bit weights of word j of 4 rows, low halves (element 2j) or high halves (2j + 1).
fn lo4(v: vec4<u32>) -> vec4<f32> {
  return vec4<f32>(halves(v.x).x, halves(v.y).x, halves(v.z).x, halves(v.w).x);
}
fn hi4(v: vec4<u32>) -> vec4<f32> {
  return vec4<f32>(halves(v.x).y, halves(v.y).y, halves(v.z).y, halves(v.w).y);
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let E = params.E;
  let t = wid.y;
  // groups is read-only here: values read at uniform indices are uniform, so the exits below are too.
  if (t >= groups[3u * E]) { return; }
  var lo = 0u;   // tiles start[lo] ≤ t < start[hi]
  var hi = E;
  loop {
    if (hi - lo <= 1u) { break; }
    let mid = (lo + hi) / 2u;
    if (groups[2u * E + mid] <= t) { lo = mid; } else { hi = mid; }
  }
  let e = lo;
  if (e < params.e0 || e >= params.e0 + params.count) { return; }
  let lt = t - groups[2u * E + e];
  let s0 = 3u * E + 1u + groups[E + e] + lt * BM;   // first order entry of the tile
  let nr = min(BM, groups[e] - lt * BM);              // pair rows in the tile
  let K = params.K;
  let cols = params.cols;
#ifdef SMALL_TILE
  let tx = lid % 64u;
  let ty = lid / 64u;
#else
  let tx = lid % 16u;
  let ty = lid / 16u;
#endif
#ifdef GATE_UP
  let n0 = wid.x * 64u;
#else
  let n0 = wid.x * 128u;
#endif

  // Staging tasks: lanes [0, BM) own x (4 pair rows × 8 k), lanes [64, 192) own W (4 weight rows × 8 k).
  let xt = lid < BM;
  let wt = lid >= 64u && lid < 192u;
  let tsk = select(lid - 64u, lid, xt);
  let r4 = tsk / 4u;   // group of 4 rows
  let c = tsk % 4u;    // chunk of 8 k
  var xrow = vec4<u32>(0u);   // x vec4 index of each row's start
  var wrow = vec4<u32>(0u);   // stack row of each weight row
  if (xt) {
    let m = min(vec4<u32>(r4 * 4u) + vec4<u32>(0u, 1u, 2u, 3u), vec4<u32>(nr - 1u));
    let p = vec4<u32>(groups[s0 + m.x], groups[s0 + m.y], groups[s0 + m.z], groups[s0 + m.w]);
    xrow = (p / params.kdiv) * (K / 4u);
  }
  if (wt) {
    let j = vec4<u32>(r4 * 4u) + vec4<u32>(0u, 1u, 2u, 3u);
    let base = vec4<u32>((e - params.e0) * params.N);
#ifdef GATE_UP
    // Rows 0-63: gates n0 + j; rows 64-127: the same columns' up rows.
    let col = min(vec4<u32>(n0) + (j % vec4<u32>(64u)), vec4<u32>(cols - 1u));
    wrow = base + col + select(vec4<u32>(0u), vec4<u32>(cols), j >= vec4<u32>(64u));
#else
    wrow = base + min(vec4<u32>(n0) + j, vec4<u32>(cols - 1u));
#endif
  }

#ifdef SMALL_TILE
  var acc_lo = vec4<f32>(0.0);   // rows ty·4.. of weight row tx
  var acc_hi = vec4<f32>(0.0);   // ... of weight row 64 + tx
#else
  var acc0 = vec4<f32>(0.0); var acc1 = vec4<f32>(0.0); var acc2 = vec4<f32>(0.0); var acc3 = vec4<f32>(0.0);
  var acc4 = vec4<f32>(0.0); var acc5 = vec4<f32>(0.0); var acc6 = vec4<f32>(0.0); var acc7 = vec4<f32>(0.0);
#endif
  // In flight, named (arrays indexed in loops end up in local memory): x rows i, k values 0-3 in xa_i and
  // 4-7 in xb_i; W word j of the 4 rows in w_j, each row's scale (low half) | bias (high half) in wsb.
  var xa0 = vec4<f32>(0.0); var xa1 = vec4<f32>(0.0); var xa2 = vec4<f32>(0.0); var xa3 = vec4<f32>(0.0);
  var xb0 = vec4<f32>(0.0); var xb1 = vec4<f32>(0.0); var xb2 = vec4<f32>(0.0); var xb3 = vec4<f32>(0.0);
  var w0 = vec4<u32>(0u); var w1 = vec4<u32>(0u); var w2 = vec4<u32>(0u); var w3 = vec4<u32>(0u);
  var wsb = vec4<u32>(0u);

  for (var k0 = 0u; k0 < K + BK; k0 += BK) {
    // 1. Store the tile fetched in the previous iteration.
    if (k0 > 0u) {
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
        let wo = c * 8u * (BN / 4u) + r4;
#ifdef QUANT
        let s4 = vec4<f32>(half_at(wsb.x, 0u), half_at(wsb.y, 0u), half_at(wsb.z, 0u), half_at(wsb.w, 0u));
        let b4 = vec4<f32>(half_at(wsb.x, 1u), half_at(wsb.y, 1u), half_at(wsb.z, 1u), half_at(wsb.w, 1u));
        for (var v = 0u; v < 8u; v++) {
#ifdef Q4
          let q = magic((w0 >> vec4<u32>(4u * v)) & vec4<u32>(15u));
#else
          let q = magic((select(w0, w1, v >= 4u) >> vec4<u32>(8u * (v % 4u))) & vec4<u32>(255u));
#endif
          ws[wo + v * (BN / 4u)] = fma(s4, q, b4);
        }
#else
        ws[wo] = lo4(w0);
        ws[wo + (BN / 4u)] = hi4(w0);
        ws[wo + 2u * (BN / 4u)] = lo4(w1);
        ws[wo + 3u * (BN / 4u)] = hi4(w1);
        ws[wo + 4u * (BN / 4u)] = lo4(w2);
        ws[wo + 5u * (BN / 4u)] = hi4(w2);
        ws[wo + 6u * (BN / 4u)] = lo4(w3);
        ws[wo + 7u * (BN / 4u)] = hi4(w3);
#endif
      }
    }
    workgroupBarrier();
    // 2. Prefetch the next tile's raw values into registers (overlaps the multiply below).
    if (k0 < K) {
      let kk = k0 + c * 8u;
      if (xt) {
        let xi = xrow + vec4<u32>(kk / 4u);
        xa0 = x[xi.x]; xb0 = x[xi.x + 1u];
        xa1 = x[xi.y]; xb1 = x[xi.y + 1u];
        xa2 = x[xi.z]; xb2 = x[xi.z + 1u];
        xa3 = x[xi.w]; xb3 = x[xi.w + 1u];
      }
      if (wt) {
#ifdef Q4
        let wi = wrow * (K / 8u) + vec4<u32>(kk / 8u);
        w0 = vec4<u32>(w[wi.x], w[wi.y], w[wi.z], w[wi.w]);
#elif Q8
        let wi = wrow * (K / 4u) + vec4<u32>(kk / 4u);
        w0 = vec4<u32>(w[wi.x], w[wi.y], w[wi.z], w[wi.w]);
        w1 = vec4<u32>(w[wi.x + 1u], w[wi.y + 1u], w[wi.z + 1u], w[wi.w + 1u]);
#else
        let wi = wrow * (K / 2u) + vec4<u32>(kk / 2u);
        w0 = vec4<u32>(w[wi.x], w[wi.y], w[wi.z], w[wi.w]);
        w1 = vec4<u32>(w[wi.x + 1u], w[wi.y + 1u], w[wi.z + 1u], w[wi.w + 1u]);
        w2 = vec4<u32>(w[wi.x + 2u], w[wi.y + 2u], w[wi.z + 2u], w[wi.w + 2u]);
        w3 = vec4<u32>(w[wi.x + 3u], w[wi.y + 3u], w[wi.z + 3u], w[wi.w + 3u]);
#endif
#ifdef QUANT
        // Each row's 16-bit scale into the low half and bias into the high half of one word.
        let gi = wrow * (K / GS) + vec4<u32>(kk / GS);
        let h = gi >> vec4<u32>(1u);
        let sh = (gi & vec4<u32>(1u)) * 16u;
        let sw = vec4<u32>(scales[h.x], scales[h.y], scales[h.z], scales[h.w]);
        let bw = vec4<u32>(biases[h.x], biases[h.y], biases[h.z], biases[h.w]);
        wsb = ((sw >> sh) & vec4<u32>(0xffffu)) | (((bw >> sh) & vec4<u32>(0xffffu)) << vec4<u32>(16u));
#endif
      }
    }
    // 3. Multiply the staged tile.
    if (k0 > 0u) {
      for (var kk = 0u; kk < BK; kk++) {
        let a = xs[kk * (BM / 4u) + ty];
#ifdef SMALL_TILE
        let b = ws[kk * (BN / 4u) + tx / 4u][tx % 4u];
        let b2 = ws[kk * (BN / 4u) + 16u + tx / 4u][tx % 4u];
        acc_lo = fma(a, vec4<f32>(b), acc_lo);
        acc_hi = fma(a, vec4<f32>(b2), acc_hi);
#else
        let b = ws[kk * (BN / 4u) + tx];
        let b2 = ws[kk * (BN / 4u) + 16u + tx];
        acc0 = fma(vec4<f32>(a.x), b, acc0);
        acc1 = fma(vec4<f32>(a.y), b, acc1);
        acc2 = fma(vec4<f32>(a.z), b, acc2);
        acc3 = fma(vec4<f32>(a.w), b, acc3);
        acc4 = fma(vec4<f32>(a.x), b2, acc4);
        acc5 = fma(vec4<f32>(a.y), b2, acc5);
        acc6 = fma(vec4<f32>(a.z), b2, acc6);
        acc7 = fma(vec4<f32>(a.w), b2, acc7);
#endif
      }
    }
    workgroupBarrier();
  }

#ifdef SMALL_TILE
  for (var i = 0u; i < 4u; i++) {
    let m = ty * 4u + i;
    if (m >= nr) { break; }
    let yb = groups[s0 + m] * cols;
    let n = n0 + tx;
#ifdef GATE_UP
    if (n < cols) { y[yb + n] = silu(acc_lo[i]) * acc_hi[i]; }
#else
    if (n < cols) { y[yb + n] = acc_lo[i]; }
    if (n + 64u < cols) { y[yb + n + 64u] = acc_hi[i]; }
#endif
  }
#else
  // Row i of the lane: acc_i (columns tx·4..), acc_{4+i} (64 + tx·4..; GATE_UP: the same columns' up rows).
  var lo_acc = array<vec4<f32>, 4>(acc0, acc1, acc2, acc3);
  var hi_acc = array<vec4<f32>, 4>(acc4, acc5, acc6, acc7);
  for (var i = 0u; i < 4u; i++) {
    let m = ty * 4u + i;
    if (m >= nr) { break; }
    let yb = groups[s0 + m] * cols;
    for (var j = 0u; j < 4u; j++) {
      let n = n0 + tx * 4u + j;
#ifdef GATE_UP
      if (n < cols) { y[yb + n] = silu(lo_acc[i][j]) * hi_acc[i][j]; }
#else
      if (n < cols) { y[yb + n] = lo_acc[i][j]; }
      if (n + 64u < cols) { y[yb + n + 64u] = hi_acc[i][j]; }
#endif
    }
  }
#endif
}
