// Gated delta rule, chunked (WY) form for prefill segments, 2 of 3: the state pass, the one part serial over
// chunks (fla chunk_gated_delta_rule_fwd_h). Per chunk, from its starting state S (DK, dv) and
// gated_delta_chunk_wy.wgsl's W, U and decays (e^(G_last) = e^(g₀)·e^(G_last − G₀)):
//   hs ← S (the output pass reads it);  U ← V' = U − W·S  (the chunk's deltas, in place)
//   S ← e^(G_last)·S + Σ_t e^(G_last − G_t)·k̂_t ⊗ V'_t  (G_last: the chunk's last slot; padding adds 0)
// S starts at zero when the segment's first row has pos 0, else from the state at its slot; it is written
// back after the last chunk. Columns of S are independent, so a workgroup takes BV of them.
// Bindings:  rows    (R)                               step rows: pos, slot of the segment's first row
//            conv    (R, 2·nk·DK + nv·dv) f32           k read here
//            wu      (chunks, nv, C, DK + dv) f32       [W | U]; U becomes V'
//            aux     (chunks, nv, C) vec4<f32>          (g, 1/‖k‖, ·, e^(G_last − G_t))
//            state   (slots, nv, DK, dv) f32            S[i, j] at (i, j)
//            hs      (chunks, nv, DK, dv) f32           out: S at each chunk's start
// Grid: (⌈dv / BV⌉, nv). 256 lanes: lane (ig, j) holds S[ig + IG·m, j] (IG = 256 / BV) in registers and
// computes V'[ig + IG·n, j]. Workgroup memory: S (DK, BV) 8 KiB at DK 128, BV 16; V' (C, BV) 4 KiB at C 64.
// Defines: C (16, 32 or 64), DK, BV (16 or 32).
#include "lib/common.wgsl"

const C: u32 = {{C}}u;
const DK: u32 = {{DK}}u;
const BV: u32 = {{BV}}u;
const WG: u32 = 256u;
const IG: u32 = WG / BV;
const DKM: u32 = (DK + IG - 1u) / IG;  // S rows per lane
const TM: u32 = C / IG;                // V' rows per lane

struct Params {
  row0: u32,   // the segment's first row
  len: u32,    // its rows
  cbase: u32,  // its first scratch chunk
  nk: u32,     // key heads
  nv: u32,     // value heads
  dv: u32,     // value head dim
}
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> rows: array<Row>;
@group(0) @binding(2) var<storage, read> conv: array<f32>;
@group(0) @binding(3) var<storage, read_write> wu: array<f32>;
@group(0) @binding(4) var<storage, read_write> aux: array<vec4<f32>>;  // read_write: one buffer with wu
@group(0) @binding(5) var<storage, read_write> state: array<f32>;
@group(0) @binding(6) var<storage, read_write> hs: array<f32>;

var<workgroup> sh: array<f32, DK * BV>;  // S at the chunk's start
var<workgroup> vn: array<f32, C * BV>;   // V'
var<workgroup> fk: array<f32, C>;        // e^(G_last − G_t) / ‖k_t‖

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let j = lid % BV;
  let ig = lid / BV;
  let h = wid.y;
  let nv = params.nv;
  let dv = params.dv;
  let col = wid.x * BV + j;
  let ok = col < dv;
  let jc = min(col, dv - 1u);  // padding lanes read a real column and never write
  let kcol = (params.nk + h / (nv / params.nk)) * DK;
  let width = 2u * params.nk * DK + nv * dv;
  let nb = DK + dv;
  let row0 = params.row0;
  let len = params.len;
  let head = rows[row0];
  let off = head.pos % C;

  let sbase = (head.slot * nv + h) * DK * dv + jc;
  var s: array<f32, DKM>;  // zero: a new sequence
  if (head.pos != 0u) {
    for (var m = 0u; m < DKM; m++) {
      let i = ig + IG * m;
      if (i < DK) { s[m] = state[sbase + i * dv]; }
    }
  }

  for (var c = 0u; c < (off + len + C - 1u) / C; c++) {
    let cs = params.cbase + c;
    let hbase = (cs * nv + h) * DK * dv + jc;
    for (var m = 0u; m < DKM; m++) {
      let i = ig + IG * m;
      if (i < DK) {
        sh[i * BV + j] = s[m];
        if (ok) { hs[hbase + i * dv] = s[m]; }
      }
    }
    let abase = (cs * nv + h) * C;
    let a0 = aux[abase];
    let decay = exp(a0.x) * a0.w;  // e^(G_last) = e^(g_0)·e^(G_last − G_0)
    if (lid < C) {
      let x = aux[abase + lid];
      fk[lid] = x.w * x.y;
    }
    workgroupBarrier();

    let wbase = (cs * nv + h) * C * nb;
    for (var n = 0u; n < TM; n++) {
      let t = ig + IG * n;
      let w = wbase + t * nb;
      var x = 0.0;
      if (ok) { x = wu[w + DK + col]; }
      for (var i = 0u; i < DK; i++) { x = fma(-wu[w + i], sh[i * BV + j], x); }
      vn[t * BV + j] = x;
      if (ok) { wu[w + DK + col] = x; }
    }
    workgroupBarrier();

    // Padding slots add nothing (V' = 0 there): only the segment's own slots are read.
    let t0 = select(0u, off, c == 0u);
    let t1 = min(C, off + len - c * C);
    for (var m = 0u; m < DKM; m++) {
      let i = ig + IG * m;
      if (i < DK) {
        var x = s[m] * decay;
        for (var t = t0; t < t1; t++) {
          let r = row0 + c * C + t - off;
          x = fma(fk[t] * conv[r * width + kcol + i], vn[t * BV + j], x);
        }
        s[m] = x;
      }
    }
    workgroupBarrier();
  }

  if (ok) {
    for (var m = 0u; m < DKM; m++) {
      let i = ig + IG * m;
      if (i < DK) { state[sbase + i * dv] = s[m]; }
    }
  }
}
