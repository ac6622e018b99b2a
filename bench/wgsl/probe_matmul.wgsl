// FLOP-rate probe: C = A·B in f32 (no tensor cores are reachable from WGSL), register-tiled. The ceiling
// prefill matmuls are measured against: the best a plain WGSL kernel gets, not the datasheet.
//   C[m, n] = Σ_k A[m, k] · B[k, n]       A (M, K), B (K, N), C (M, N), row-major; M, N, K multiples of the tiles
// Bindings:  a (M·K) f32,  b (K·N) f32,  c (M·N) f32
// Grid: (N / BN, M / BM). A workgroup computes a BM×BN tile with (BM/TM)·(BN/TN) lanes holding TM×TN
// accumulators each; lane (i, j) owns rows i + r·(BM/TM) and columns j + s·(BN/TN), so lanes of a row read
// consecutive workgroup-memory words. A and B pass through workgroup memory in BK-deep slices.
const BM: u32 = {{BM}}u;
const BN: u32 = {{BN}}u;
const BK: u32 = {{BK}}u;
const TM: u32 = {{TM}}u;
const TN: u32 = {{TN}}u;
const LM: u32 = BM / TM;   // lanes along M
const LN: u32 = BN / TN;   // lanes along N
const WG: u32 = LM * LN;

struct Params {
  M: u32,  // rows of A and C
  N: u32,  // columns of B and C
  K: u32,  // reduction length
}
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read_write> c: array<f32>;

var<workgroup> As: array<f32, BK * BM>;  // [k][m]
var<workgroup> Bs: array<f32, BK * BN>;  // [k][n]

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let K = params.K;
  let N = params.N;
  let m0 = wid.y * BM;
  let n0 = wid.x * BN;
  let li = lid / LN;
  let lj = lid % LN;
  var acc: array<f32, TM * TN>;
  var ra: array<f32, TM>;
  var rb: array<f32, TN>;
  for (var k0 = 0u; k0 < K; k0 += BK) {
    for (var e = lid; e < BM * BK; e += WG) {
      let m = e / BK;
      let k = e % BK;
      As[k * BM + m] = a[(m0 + m) * K + k0 + k];
    }
    for (var e = lid; e < BK * BN; e += WG) {
      let k = e / BN;
      let n = e % BN;
      Bs[k * BN + n] = b[(k0 + k) * N + n0 + n];
    }
    workgroupBarrier();
    for (var k = 0u; k < BK; k++) {
      for (var r = 0u; r < TM; r++) { ra[r] = As[k * BM + li + r * LM]; }
      for (var s = 0u; s < TN; s++) { rb[s] = Bs[k * BN + lj + s * LN]; }
      for (var r = 0u; r < TM; r++) {
        for (var s = 0u; s < TN; s++) { acc[r * TN + s] = fma(ra[r], rb[s], acc[r * TN + s]); }
      }
    }
    workgroupBarrier();
  }
  for (var r = 0u; r < TM; r++) {
    for (var s = 0u; s < TN; s++) { c[(m0 + li + r * LM) * N + n0 + lj + s * LN] = acc[r * TN + s]; }
  }
}
