// Shared by the vector-mode expert matmuls (moe_vec.wgsl, moe_vec_x8.wgsl): their params, bindings (see
// their headers), COMBINE's workgroup memory, the team's weight rows, pair blocks and stores. The kernel
// defines T (lanes per team), WG and, under COMBINE, CB (columns per workgroup).

#ifdef GATE_UP
const CT: u32 = 2u;      // output columns per team
#else
const CT: u32 = 4u;
#endif

#ifdef COMBINE
const MAXK: u32 = 16u;   // experts per row at most (MOE_MAX_K)

struct Params {
  row0: u32,   // first row
  k: u32,      // pairs per row
  K: u32,      // reduction length (elements, a multiple of 32 and of GS)
  N: u32,      // stack rows per expert = columns of the residual
}
#else
struct Params {
  P0: u32,     // first pair (row0·k)
  pairs: u32,  // pairs (M·k)
  K: u32,      // reduction length (elements, a multiple of 32 and of GS)
  N: u32,      // stack rows per expert (GATE_UP: 2I)
  cols: u32,   // output columns per pair (GATE_UP: I, else N) = row stride of y
  e0: u32,     // first expert of this shard
  count: u32,  // experts in this shard
  kdiv: u32,   // pairs per x row (GATE_UP: k; else 1)
#ifdef NORM
  eps: f32,    // RMSNorm epsilon
#endif
#ifdef ROUTE
  E: u32,      // experts (the router's logits per row)
  renorm: u32, // 1: routing weights divided by their sum
#endif
}
#endif
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> w: array<vec4<u32>>;
#ifdef QUANT
@group(0) @binding(3) var<storage, read> scales: array<u32>;
@group(0) @binding(4) var<storage, read> biases: array<u32>;
#endif
#ifdef ROUTE
@group(0) @binding(5) var<storage, read_write> ids: array<u32>;
@group(0) @binding(7) var<storage, read_write> weights: array<f32>;
@group(0) @binding(11) var<storage, read> logits: array<f32>;
#else
@group(0) @binding(5) var<storage, read> ids: array<u32>;
#endif
#ifdef COMBINE
@group(0) @binding(6) var<storage, read_write> xr: array<f32>;
@group(0) @binding(7) var<storage, read> weights: array<f32>;
#ifdef SHARED
@group(0) @binding(8) var<storage, read> sy: array<f32>;
@group(0) @binding(9) var<storage, read> gate: array<f32>;
#endif
var<workgroup> ys: array<f32, MAXK * CB>;   // [pair j][column]: the row's k products of the columns
var<workgroup> wk: array<f32, MAXK>;        // the row's routing weights
#else
@group(0) @binding(6) var<storage, read_write> y: array<f32>;
#endif
#ifdef NORM
@group(0) @binding(10) var<storage, read> gamma: array<vec4<f32>>;
#endif

#ifndef COMBINE
// Whether the workgroup of pair q0 (expert e) serves e: e is in this shard and no earlier pair has it (the
// workgroup of an expert's first pair serves all its pairs, its weights read once per block of 4).
fn serves(e: u32, q0: u32) -> bool {
#ifdef ROUTE
  return true;   // one row: its k experts differ, and one shard holds them all
#else
  if (e < params.e0 || e >= params.e0 + params.count) { return false; }
  for (var q = 0u; q < q0; q++) {
    if (ids[params.P0 + q] == e) { return false; }
  }
  return true;
#endif
}

// Stack rows of team tid's 4 weight rows in the expert whose first stack row is base: GATE_UP gates j, j+1
// and their up rows, else 4 adjacent columns. Rows clamped in range: computed, never written.
fn team_rows(tid: u32, base: u32) -> vec4<u32> {
  let cols = params.cols;
#ifdef GATE_UP
  let j0 = min(tid * 2u, cols - 1u);
  let j1 = min(tid * 2u + 1u, cols - 1u);
  return vec4<u32>(base + j0, base + j1, base + cols + j0, base + cols + j1);
#else
  return vec4<u32>(base) + min(vec4<u32>(tid * 4u) + vec4<u32>(0u, 1u, 2u, 3u), vec4<u32>(cols - 1u));
#endif
}

// The next block from pair *q on: up to 4 pairs of expert e (.p; slots past .n repeat the first: computed,
// never written); *q moves past them. n = 0: none left.
struct Block { p: vec4<u32>, n: u32 }

fn next_block(e: u32, q: ptr<function, u32>) -> Block {
  var b = Block(vec4<u32>(0u), 0u);
#ifdef ROUTE
  // One row: pair *q is its expert's only pair.
  if (*q < params.pairs) {
    b = Block(vec4<u32>(params.P0 + *q), 1u);
    *q = params.pairs;
  }
#else
  while (*q < params.pairs && b.n < 4u) {
    if (ids[params.P0 + *q] == e) {
      b.p[b.n] = params.P0 + *q;
      b.n++;
    }
    *q += 1u;
  }
  for (var j = b.n; j < 4u; j++) { b.p[j] = b.p[0]; }
#endif
  return b;
}

// Pair p's outputs of team tid (the team's 4 row sums in acc; f: the row's norm factor under NORM).
fn store_pair(p: u32, tid: u32, lane: u32, acc: vec4<f32>, f: f32) {
  let cols = params.cols;
  for (var c = lane; c < CT; c += T) {
    let n = tid * CT + c;
    if (n < cols) {
#ifdef NORM
      y[p * cols + n] = silu(acc[c] * f) * (acc[2u + c] * f);
#elif GATE_UP
      y[p * cols + n] = silu(acc[c]) * acc[2u + c];
#else
      y[p * cols + n] = acc[c];
#endif
    }
  }
}
#else
// What lane lid's sum adds to, loaded before the products (lane lid < CB sums column n0 + lid of row r,
// clamped; CB ≤ WG): the residual's index (.i) and value (.v) and, under SHARED, the gated shared expert's
// term (.s). The row's routing weights go to wk.
struct Residual { i: u32, v: f32, s: f32 }

fn combine_load(r: u32, n0: u32, lid: u32) -> Residual {
  let N = params.N;
  let k = params.k;
  let xi = r * N + min(n0 + lid, N - 1u);
  var res = Residual(xi, xr[xi], 0.0);
#ifdef SHARED
  res.s = sy[xi] * (1.0 / (1.0 + exp(-gate[r])));
#endif
  if (lid < k) { wk[lid] = weights[r * k + lid]; }
  return res;
}

// Stack rows of pair p's expert for columns c0 .. c0 + 3, clamped in range: computed, never stored.
fn item_rows(p: u32, c0: u32) -> vec4<u32> {
  let N = params.N;
  return vec4<u32>(ids[p] * N) + min(vec4<u32>(c0) + vec4<u32>(0u, 1u, 2u, 3u), vec4<u32>(N - 1u));
}

// moe_combine.wgsl's sum, term for term, of lane lid's column into the residual (ys complete: after the
// barrier).
fn combine_store(res: Residual, n0: u32, lid: u32) {
  if (lid < CB && n0 + lid < params.N) {
    var acc = 0.0;
    for (var j = 0u; j < params.k; j++) { acc += wk[j] * ys[j * CB + lid]; }
#ifdef SHARED
    acc += res.s;
#endif
    xr[res.i] = res.v + acc;
  }
}
#endif
