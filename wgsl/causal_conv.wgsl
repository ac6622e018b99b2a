// Causal depthwise conv1d over each sequence's tokens with a rolling per-sequence state (Qwen3-Next gated
// DeltaNet, LFM2 short conv):
//   u[t, c] = src[t, x + c] · (IN_GATE: src[t, in_gate + c])
//   y[t, c] = fn(Σ_{i<KC} w[c, i] · u[t − (KC−1) + i, c]) · (OUT_GATE: src[t, out_gate + c])
//   fn = silu (SILU) or the identity
// A unit is one sequence's consecutive rows: workgroup row u takes rows row0 + u·len .. row0 + (u+1)·len − 1
// (decode: len 1, one unit per row; a prefill segment: one unit). u before the unit's first row comes from
// the state at that row's slot (zero when its pos is 0: a new sequence, whatever the slot holds); after the
// unit the state holds its last KC−1 inputs (older ones from the old state when the unit is shorter).
// Bindings:  rows   (R)                    step rows: pos and slot of each unit's first row
//            src    (R, lds) act, or f32 with SRC_F32
//            weight (C, KC) f32             weight[c, KC−1] multiplies the current token
//            state  (slots, KC−1, C) f32    the last KC−1 inputs u of the sequence, oldest first
//            y      (R, C) f32
// Grid: (ceil(C / CB), units); CB = WG / tl channels per workgroup, tl lanes per channel, each a contiguous
// run of the unit's tokens with a sliding window of KC inputs in registers. A unit never spans workgroups,
// so the state write-back can follow every read of the old state behind one barrier.
// Defines: KC (2..8: a private array length must be a const-expression), SILU, IN_GATE, OUT_GATE.
#include "lib/common.wgsl"

override WG: u32 = 256;
const KC: u32 = {{KC}}u;

struct Params {
  row0: u32,      // first row of the first unit
  len: u32,       // rows per unit
  C: u32,         // channels
  lds: u32,       // src row stride (elements)
  x: u32,         // src column of u's channel 0
  in_gate: u32,   // src column of the input gate's channel 0 (IN_GATE)
  out_gate: u32,  // src column of the output gate's channel 0 (OUT_GATE)
  tl: u32,        // lanes per channel (a power of two dividing WG)
}
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> rows: array<Row>;
#ifdef SRC_F32
@group(0) @binding(2) var<storage, read> src: array<f32>;
#else
@group(0) @binding(2) var<storage, read> src: array<act>;
#endif
@group(0) @binding(3) var<storage, read> weight: array<f32>;
@group(0) @binding(4) var<storage, read_write> state: array<f32>;
@group(0) @binding(5) var<storage, read_write> y: array<f32>;

// The conv input of row r, channel c.
fn input_at(r: u32, c: u32) -> f32 {
  let o = r * params.lds + c;
#ifdef IN_GATE
  return f32(src[o + params.x]) * f32(src[o + params.in_gate]);
#else
  return f32(src[o + params.x]);
#endif
}

// u at time tau of the unit (tau < 0: before it, from the old state or zero).
fn u_at(first: u32, tau: i32, c: u32, sbase: u32, fresh: bool) -> f32 {
  if (tau >= 0) { return input_at(first + u32(tau), c); }
  if (fresh) { return 0.0; }
  return state[sbase + u32(tau + i32(KC) - 1) * params.C + c];
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let C = params.C;
  let len = params.len;
  let cb = WG / params.tl;
  let c = wid.x * cb + lid % cb;
  let lane = lid / cb;
  let live = c < C;
  let first = params.row0 + wid.y * len;
  let head = rows[first];
  let fresh = head.pos == 0u;
  let sbase = head.slot * (KC - 1u) * C;

  let chunk = (len + params.tl - 1u) / params.tl;
  let t0 = min(lane * chunk, len);
  let t1 = min(t0 + chunk, len);
  if (live && t0 < t1) {
    var w: array<f32, KC>;
    var win: array<f32, KC>;  // win[i] = u[t − (KC−1) + i]
    for (var i = 0u; i < KC; i++) { w[i] = weight[c * KC + i]; }
    for (var i = 0u; i + 1u < KC; i++) {
      win[i] = u_at(first, i32(t0 + i) - i32(KC - 1u), c, sbase, fresh);
    }
    for (var t = t0; t < t1; t++) {
      let r = first + t;
      win[KC - 1u] = input_at(r, c);
      var acc = 0.0;
      for (var i = 0u; i < KC; i++) { acc = fma(w[i], win[i], acc); }
#ifdef SILU
      acc = silu(acc);
#endif
#ifdef OUT_GATE
      acc = acc * f32(src[r * params.lds + params.out_gate + c]);
#endif
      y[r * C + c] = acc;
      for (var i = 0u; i + 1u < KC; i++) { win[i] = win[i + 1u]; }
    }
  }

  // Every lane's reads of the old state come before the write-back.
  storageBarrier();
  if (live && lane == 0u) {
    var keep: array<f32, KC>;
    for (var k = 0u; k + 1u < KC; k++) {
      keep[k] = u_at(first, i32(len + k) - i32(KC - 1u), c, sbase, fresh);
    }
    for (var k = 0u; k + 1u < KC; k++) { state[sbase + k * C + c] = keep[k]; }
  }
}
