// Sampling on the GPU, one workgroup per logit row, and the sequence advance that lets the next step run
// without the CPU: the chosen id goes to hist[slot, pos + 1] (read by the next step's embedding) and the
// slot's position moves on; EOS or the length limit sets `done`, after which the slot is left untouched.
//   penalties first (OpenAI frequency/presence, over the last PENALTY_WINDOW tokens of the sequence, prompt
//   included, as llama.cpp's penalty_last_n): each distinct id there loses count·frequency + presence.
//   greedy (temperature 0 or top_k 1): argmax, lowest id on ties.
//   otherwise z = logits / T; keep z ≥ threshold, where the threshold is the k-th largest z (top_k), then
//   the smallest set of largest z whose probability mass reaches top_p, then z_max + ln(min_p); thresholds
//   are found by bisection on the value (ties at the threshold are all kept). Draw u from a counter-based
//   hash of (seed, position) and take the first id whose running mass (in id order) exceeds u.
// Bindings:  logits (L, V) f32, penalised in place;  lrows (L) u32 step row of each logit row;  rows (R)
//            sp     (slots) SampleParams;  slots (slots) SlotState;  hist (slots, ctx) u32;  eos (1 + n) u32
// Grid: (L). Workgroup: WG lanes; lane t scans ids t, t + WG, ... (and a contiguous chunk when drawing).
#include "lib/common.wgsl"

override WG: u32 = 256;
const PENALTY_WINDOW: u32 = 64u;  // one lane per window token (capped at WG)
#include "lib/reduce.wgsl"

struct Params {
  V: u32,    // vocabulary (logit row length)
  ctx: u32,  // hist row length per slot (tokens)
}
struct SampleParams {
  temperature: f32,
  top_k: u32,
  top_p: f32,
  min_p: f32,
  seed: u32,
  frequency_penalty: f32,
  presence_penalty: f32,
  _pad2: u32,
}
struct SlotState {
  pos: u32,    // position of the last token in hist (the next step's input)
  limit: u32,  // last position a generated token may take
  done: u32,   // 1 after EOS or the limit
  _pad: u32,
}
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read_write> logits: array<f32>;
@group(0) @binding(2) var<storage, read> lrows: array<u32>;
@group(0) @binding(3) var<storage, read> rows: array<Row>;
@group(0) @binding(4) var<storage, read> sp: array<SampleParams>;
@group(0) @binding(5) var<storage, read_write> slots: array<SlotState>;
@group(0) @binding(6) var<storage, read_write> hist: array<u32>;
@group(0) @binding(7) var<storage, read> eos: array<u32>;

var<workgroup> arg_v: array<f32, WG>;
var<workgroup> arg_i: array<u32, WG>;
var<workgroup> pick: u32;
var<workgroup> is_done: u32;

fn pcg(v: u32) -> u32 {
  let s = v * 747796405u + 2891336453u;
  let w = ((s >> ((s >> 28u) + 4u)) ^ s) * 277803737u;
  return (w >> 22u) ^ w;
}

// Count (as f32) and mass of ids with z ≥ t, summed over the workgroup.
fn count_ge(base: u32, t: f32, inv_t: f32, lid: u32) -> f32 {
  var c = 0.0;
  for (var i = lid; i < params.V; i += WG) { c += select(0.0, 1.0, logits[base + i] * inv_t >= t); }
  return wg_sum(c, lid);
}
fn mass_ge(base: u32, t: f32, inv_t: f32, zmax: f32, lid: u32) -> f32 {
  var s = 0.0;
  for (var i = lid; i < params.V; i += WG) {
    let z = logits[base + i] * inv_t;
    if (z >= t) { s += exp(z - zmax); }
  }
  return wg_sum(s, lid);
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let lr = wid.x;
  let row = rows[lrows[lr]];
  let slot = row.slot;
  if (lid == 0u) { is_done = slots[slot].done; }
  if (workgroupUniformLoad(&is_done) != 0u) { return; }  // slots is read_write: load it uniformly
  let p = sp[slot];
  let V = params.V;
  let base = lr * V;

  if (p.frequency_penalty != 0.0 || p.presence_penalty != 0.0) {
    // Lane j takes the token j places back from the newest; only the newest occurrence of an id applies.
    let h0 = slot * params.ctx;
    let n = min(row.pos + 1u, min(PENALTY_WINDOW, WG));
    if (lid < n) {
      let tok = hist[h0 + row.pos - lid];
      var count = 0u;
      var newest = true;
      for (var j = 0u; j < n; j++) {
        if (hist[h0 + row.pos - j] == tok) {
          count++;
          if (j < lid) { newest = false; }
        }
      }
      if (newest && tok < V) { logits[base + tok] -= f32(count) * p.frequency_penalty + p.presence_penalty; }
    }
    storageBarrier();
  }

  // Argmax (lowest id on ties) and the minimum, in fixed order.
  var bv = -3.0e38;
  var bi = 0u;
  var mn = 3.0e38;
  for (var i = lid; i < V; i += WG) {
    let v = logits[base + i];
    if (v > bv) { bv = v; bi = i; }
    if (v > -1.0e38) { mn = min(mn, v); }  // grammar-masked logits (-3e38) would stretch the bisections
  }
  arg_v[lid] = bv;
  arg_i[lid] = bi;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s = s >> 1u) {
    if (lid < s) {
      let ov = arg_v[lid + s];
      let oi = arg_i[lid + s];
      if (ov > arg_v[lid] || (ov == arg_v[lid] && oi < arg_i[lid])) { arg_v[lid] = ov; arg_i[lid] = oi; }
    }
    workgroupBarrier();
  }
  let lmax = arg_v[0];
  var tok = arg_i[0];
  let lmin = -wg_max(-mn, lid);

  if (p.temperature > 0.0 && p.top_k != 1u) {
    let inv_t = 1.0 / p.temperature;
    let zmax = lmax * inv_t;
    var t = lmin * inv_t;
    if (p.top_k > 1u && p.top_k < V) {
      var lo = t;
      var hi = zmax;
      for (var it = 0u; it < 32u; it++) {
        let mid = 0.5 * (lo + hi);
        if (count_ge(base, mid, inv_t, lid) >= f32(p.top_k)) { lo = mid; } else { hi = mid; }
      }
      t = lo;
    }
    if (p.top_p > 0.0 && p.top_p < 1.0) {
      let goal = p.top_p * mass_ge(base, t, inv_t, zmax, lid);
      var lo = t;
      var hi = zmax;
      for (var it = 0u; it < 32u; it++) {
        let mid = 0.5 * (lo + hi);
        if (mass_ge(base, mid, inv_t, zmax, lid) >= goal) { lo = mid; } else { hi = mid; }
      }
      t = lo;
    }
    if (p.min_p > 0.0) { t = max(t, zmax + log(p.min_p)); }
    t = min(t, zmax);  // the top id always survives

    // Draw: lane lid owns the contiguous chunk [c0, c1) of ids; running mass in id order.
    let chunk = (V + WG - 1u) / WG;
    let c0 = min(lid * chunk, V);
    let c1 = min(c0 + chunk, V);
    var part = 0.0;
    for (var i = c0; i < c1; i++) {
      let z = logits[base + i] * inv_t;
      if (z >= t) { part += exp(z - zmax); }
    }
    arg_v[lid] = part;
    if (lid == 0u) { pick = 0xffffffffu; }
    workgroupBarrier();
    var before = 0.0;
    var total = 0.0;
    for (var j = 0u; j < WG; j++) {
      if (j < lid) { before += arg_v[j]; }
      total += arg_v[j];
    }
    let h = pcg(p.seed ^ pcg(row.pos * 2654435761u + slot));
    let u = (f32(h >> 8u) + 0.5) * (1.0 / 16777216.0) * total;
    if (u >= before && u < before + part) {
      var run = before;
      var last = c0;
      for (var i = c0; i < c1; i++) {
        let z = logits[base + i] * inv_t;
        if (z >= t) {
          run += exp(z - zmax);
          last = i;
          if (run > u) { break; }
        }
      }
      pick = last;
    }
    workgroupBarrier();
    if (pick != 0xffffffffu) { tok = pick; }
  }

  if (lid == 0u) {
    let np = row.pos + 1u;
    hist[slot * params.ctx + np] = tok;
    slots[slot].pos = np;
    var done = np >= slots[slot].limit;
    let n_eos = eos[0];
    for (var e = 0u; e < n_eos; e++) { if (eos[1u + e] == tok) { done = true; } }
    if (done) { slots[slot].done = 1u; }
  }
}
