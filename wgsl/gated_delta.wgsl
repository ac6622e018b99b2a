// Gated delta rule (Qwen3-Next / Qwen3.5 gated DeltaNet), recurrent form, then the gated RMSNorm
// (HF torch_recurrent_gated_delta_rule + Qwen3NextRMSNormGated). Per unit (one sequence's consecutive rows),
// value head h (key head h / (nv/nk)), and token t in order:
//   q = l2n(q_t)·scale, k = l2n(k_t), l2n(x) = x·rsqrt(Σx² + 1e-6)
//   β = sigmoid(b);  g = −e^aLog · softplus(a + dtBias)
//   S ← S·e^g;  δ = (v − Sᵀk)·β;  S ← S + k ⊗ δ;  o = Sᵀq
//   out[t, h·dv + j] = o_j · rsqrt(mean(o²) + eps) · norm[j] · silu(z_j)
// A unit: workgroup column u takes rows row0 + u·len .. row0 + (u+1)·len − 1 (decode: len 1, a unit per row;
// a prefill segment: one unit). S starts at zero when the unit's first row has pos 0, else from the state at
// its slot; it is written back after the unit's last row.
// Bindings:  rows    (R)                               step rows: pos, slot of each unit's first row
//            conv    (R, 2·nk·DK + nv·dv) f32           [q | k | v], heads contiguous
//            src     (R, lds) act|f32                   z at z_off + h·dv + j, b at b_off + h, a at a_off + h
//            a_log, dt_bias (nv) f32;  norm (dv) f32
//            state   (slots, nv, DK, dv) f32            S[i, j] at (i, j)
//            out     (R, nv·dv) f32
// Grid: (units, nv). One workgroup per (unit, value head) holds the whole head's S: lane (p, j), p < P,
// j < DVP (dv padded to a power of two), owns column j's rows i ≡ p (mod P) in registers. q and k of a token
// are staged in workgroup memory (double-buffered: the next token loads during this one); Σk² and Σq² ride
// on the first of the two per-token reductions over p (Sᵀk, then Sᵀq), so a token costs two barriers.
// Qwen3-Next (dk = dv = 128), WG = 1,024 (the profile's deltaNet.recurrentWorkgroupSize): P = 8, 16 S
// values per lane; decode grid (D, 32).
// Raw o goes to `out`; after the unit, teams of TS lanes normalise its rows in place (mean over dv needs the
// whole head, hence one workgroup per head rather than blocks of dv).
// Serial over tokens: prefill segments take the chunked (WY) form, gated_delta_chunk_*.wgsl, instead.
// Defines: DK (key head dim), P (lanes per column): the private S rows need a const-expression length.
#include "lib/common.wgsl"
#include "lib/delta.wgsl"

override WG: u32 = 256;  // P · DVP
override DVP: u32 = 128;
override TS: u32 = 8;    // lanes per row in the norm pass (a power of two ≤ DVP)
const DK: u32 = {{DK}}u;
const P: u32 = {{P}}u;
const DKP: u32 = (DK + P - 1u) / P;

struct Params {
  row0: u32,   // first row of the first unit
  len: u32,    // rows per unit
  nk: u32,     // key heads
  nv: u32,     // value heads
  dv: u32,     // value head dim
  lds: u32,    // src row stride (elements)
  z_off: u32,  // src columns of z, b, a
  b_off: u32,
  a_off: u32,
  scale: f32,  // DK^−½
  eps: f32,    // gated-norm epsilon
}
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> rows: array<Row>;
@group(0) @binding(2) var<storage, read> conv: array<f32>;
#ifdef SRC_F32
@group(0) @binding(3) var<storage, read> src: array<f32>;
#else
@group(0) @binding(3) var<storage, read> src: array<act>;
#endif
@group(0) @binding(4) var<storage, read> a_log: array<f32>;
@group(0) @binding(5) var<storage, read> dt_bias: array<f32>;
@group(0) @binding(6) var<storage, read> norm: array<f32>;
@group(0) @binding(7) var<storage, read_write> state: array<f32>;
@group(0) @binding(8) var<storage, read_write> out: array<f32>;

var<workgroup> qk: array<f32, 4u * DK>;  // two buffers of [q | k]
var<workgroup> red: array<f32, WG>;      // per-lane partials: Sᵀk, then the norm pass's sums
var<workgroup> red_o: array<f32, WG>;    // per-lane partials of Sᵀq
var<workgroup> red_n: array<f32, 2u * P>;  // Σk², Σq² partials per p

// Raw q and k of row r (key head kh) into qk[dst ..].
fn stage(r: u32, kh: u32, width: u32, dst: u32, lid: u32) {
  for (var e = lid; e < 2u * DK; e += WG) {
    let col = select(kh * DK + e, (params.nk + kh) * DK + e - DK, e >= DK);
    qk[dst + e] = conv[r * width + col];
  }
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let jj = lid % DVP;
  let p = lid / DVP;
  let h = wid.y;
  let nv = params.nv;
  let dv = params.dv;
  let kh = h / (nv / params.nk);
  let width = 2u * params.nk * DK + nv * dv;
  let len = params.len;
  let first = params.row0 + wid.x * len;
  let head = rows[first];
  let col = jj < dv;
  let jc = min(jj, dv - 1u);  // padding lanes read a real column and never write

  let sbase = (head.slot * nv + h) * DK * dv + jc;
  var s: array<f32, DKP>;  // zero: a new sequence
  if (head.pos != 0u) {
    for (var m = 0u; m < DKP; m++) {
      let i = p + P * m;
      if (i < DK) { s[m] = state[sbase + i * dv]; }
    }
  }
  let A = -exp(a_log[h]);
  let dtb = dt_bias[h];
  stage(first, kh, width, 0u, lid);
  workgroupBarrier();

  for (var t = 0u; t < len; t++) {
    let r = first + t;
    let qb = (t & 1u) * 2u * DK;
    let kb = qb + DK;
    let beta = 1.0 / (1.0 + exp(-f32(src[r * params.lds + params.b_off + h])));
    let decay = exp(A * softplus(f32(src[r * params.lds + params.a_off + h]) + dtb));
    var kv = 0.0;
    var kk = 0.0;
    var qq = 0.0;
    for (var m = 0u; m < DKP; m++) {
      let i = p + P * m;
      if (i < DK) {
        let kx = qk[kb + i];
        let qx = qk[qb + i];
        s[m] = s[m] * decay;
        kv = fma(s[m], kx, kv);
        kk = fma(kx, kx, kk);
        qq = fma(qx, qx, qq);
      }
    }
    red[lid] = kv;
    if (jj == 0u) {
      red_n[p] = kk;
      red_n[P + p] = qq;
    }
    workgroupBarrier();

    kv = 0.0;
    kk = 0.0;
    qq = 0.0;
    for (var pp = 0u; pp < P; pp++) {
      kv += red[pp * DVP + jj];
      kk += red_n[pp];
      qq += red_n[P + pp];
    }
    let rk = inverseSqrt(kk + 1e-6);
    let v = conv[r * width + 2u * params.nk * DK + h * dv + jc];
    let d = (v - kv * rk) * beta * rk;  // δ·rk: S += k_raw ⊗ (δ·rk) is S += l2n(k) ⊗ δ
    var o = 0.0;
    for (var m = 0u; m < DKP; m++) {
      let i = p + P * m;
      if (i < DK) {
        s[m] = fma(qk[kb + i], d, s[m]);
        o = fma(s[m], qk[qb + i], o);
      }
    }
    red_o[lid] = o;
    if (t + 1u < len) { stage(r + 1u, kh, width, 2u * DK - qb, lid); }
    workgroupBarrier();
    if (p == 0u && col) {
      o = 0.0;
      for (var pp = 0u; pp < P; pp++) { o += red_o[pp * DVP + jj]; }
      out[r * nv * dv + h * dv + jj] = o * inverseSqrt(qq + 1e-6) * params.scale;
    }
  }

  if (col) {
    for (var m = 0u; m < DKP; m++) {
      let i = p + P * m;
      if (i < DK) { state[sbase + i * dv] = s[m]; }
    }
  }

  // Gated RMSNorm of the unit's rows: a team of TS lanes per row, WG / TS rows at a time.
  storageBarrier();
  let team = lid / TS;
  let tl = lid % TS;
  for (var t0 = 0u; t0 < len; t0 += WG / TS) {
    let t = t0 + team;
    let base = (first + t) * nv * dv + h * dv;
    var ss = 0.0;
    if (t < len) {
      for (var j = tl; j < dv; j += TS) {
        let x = out[base + j];
        ss = fma(x, x, ss);
      }
    }
    red[lid] = ss;
    workgroupBarrier();
    for (var w = TS / 2u; w > 0u; w = w >> 1u) {
      if (tl < w) { red[lid] = red[lid] + red[lid + w]; }
      workgroupBarrier();
    }
    let inv = inverseSqrt(red[lid - tl] / f32(dv) + params.eps);
    workgroupBarrier();
    if (t < len) {
      let zb = (first + t) * params.lds + params.z_off + h * dv;
      for (var j = tl; j < dv; j += TS) {
        out[base + j] = out[base + j] * inv * norm[j] * silu(f32(src[zb + j]));
      }
    }
  }
}
