// Shared by the FMA prefill attention kernels (attention_prefill.wgsl, attention_prefill_quad.wgsl): shapes,
// the K/V tiles in workgroup memory, and the query loads (after lib/prefill_params.wgsl: params, bindings, masks).
// Each kernel gives its tile layout: PRS (16-byte units per tile row under F16_PV) and at(t, unit).
// Variants (defines):
//   F16_TILES     f16 cache: K/V tiles hold the cache's f16 words (16-byte loads, half the workgroup memory)
//   INT8_QK       q8 cache (KV8), 32 dims per lane: the K tile stays codes for integer q·k (lib/prefill_qk8)
//   F16_PV        with F16_TILES or INT8_QK: the V tile as f16 values (q8: rounded), P·V summed in f16
//   F16_QK        quad kernel, F16_TILES: the K tile as f16 values too, q·k on f16 fused multiply-adds
//   LANE_VEC4S    vec4s of a head per lane (2, 4 or 8); LANE_16_DIMS / LANE_32_DIMS: at least 4 / 8 of them
//   WINDOW        sliding window: position pos sees keys j with pos − params.window < j ≤ pos (seen())

override G: u32 = 1;
override WG: u32 = 256;
const NV4: u32 = {{LANE_VEC4S}}u;
override L: u32 = HD / (4u * NV4);  // lanes per query vector
override QV: u32 = WG / L;   // lane groups per workgroup
override BQ: u32 = 1;        // positions per workgroup
override H4: u32 = HD / 4u;  // vec4s per head row
override RS: u32 = H4 + H4 / 8u;  // f32 tiles: padded vec4s per tile row (one per 8: distinct banks)

#ifdef F16_PV
const PV: u32 = NV4 / 2u;               // 16-byte units (8 dims each) per lane
override H8: u32 = HD / 8u;             // 16-byte units per head row
// The V tile as f16 values, eight (dims 8j .. 8j+7) per position in one Hh: one 16-byte read.
struct Hh { x: vec4<f16>, y: vec4<f16> }
var<workgroup> vs: array<Hh, BK * PRS>;
fn vh(i: u32) -> Hh { return vs[i]; }
fn vput(i: u32, x: vec4<f32>, y: vec4<f32>) { vs[i] = Hh(vec4<f16>(x), vec4<f16>(y)); }
#ifdef F16_QK
var<workgroup> ks: array<Hh, BK * PRS>;
#elif F16_TILES
var<workgroup> ks: array<vec4<u32>, BK * PRS>;
#endif
fn lo8(k: vec4<u32>) -> vec4<f32> { return vec4<f32>(unpack2x16float(k.x), unpack2x16float(k.y)); }
fn hi8(k: vec4<u32>) -> vec4<f32> { return vec4<f32>(unpack2x16float(k.z), unpack2x16float(k.w)); }
#else
#ifndef INT8_QK
var<workgroup> ks: array<vec4<f32>, BK * RS>;
#endif
var<workgroup> vs: array<vec4<f32>, BK * RS>;
// Four cache values from element e as f32 (f32 tiles).
fn ld4(e: u32) -> vec4<f32> {
#ifdef KV8
  return kv8_unpack(kv[e / 4u], kvs[e / QB]);
#else
  return vec4<f32>(f32(kv[e]), f32(kv[e + 1u]), f32(kv[e + 2u]), f32(kv[e + 3u]));
#endif
}
#endif

// A lane's slice of one head vector (4·NV4 dims).
struct Hv {
  v0: vec4<f32>, v1: vec4<f32>, v2: vec4<f32>, v3: vec4<f32>,
  v4: vec4<f32>, v5: vec4<f32>, v6: vec4<f32>, v7: vec4<f32>,
}

fn qload(o: u32, s: f32) -> Hv {
  var h: Hv;
  h.v0 = vec4<f32>(f32(q[o]), f32(q[o + 1u]), f32(q[o + 2u]), f32(q[o + 3u])) * s;
  h.v1 = vec4<f32>(f32(q[o + 4u]), f32(q[o + 5u]), f32(q[o + 6u]), f32(q[o + 7u])) * s;
#ifdef LANE_16_DIMS
  h.v2 = vec4<f32>(f32(q[o + 8u]), f32(q[o + 9u]), f32(q[o + 10u]), f32(q[o + 11u])) * s;
  h.v3 = vec4<f32>(f32(q[o + 12u]), f32(q[o + 13u]), f32(q[o + 14u]), f32(q[o + 15u])) * s;
#endif
#ifdef LANE_32_DIMS
  h.v4 = vec4<f32>(f32(q[o + 16u]), f32(q[o + 17u]), f32(q[o + 18u]), f32(q[o + 19u])) * s;
  h.v5 = vec4<f32>(f32(q[o + 20u]), f32(q[o + 21u]), f32(q[o + 22u]), f32(q[o + 23u])) * s;
  h.v6 = vec4<f32>(f32(q[o + 24u]), f32(q[o + 25u]), f32(q[o + 26u]), f32(q[o + 27u])) * s;
  h.v7 = vec4<f32>(f32(q[o + 28u]), f32(q[o + 29u]), f32(q[o + 30u]), f32(q[o + 31u])) * s;
#endif
  return h;
}
