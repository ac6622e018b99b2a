// Random fill for synthetic benchmark weights, made on the GPU so a multi-GB model needs no upload.
// Word w of a buffer is a pure function of (seed, word0 + w): a tensor split into shards by rows (2 GiB
// binding limit) gets the same contents as unsplit, and every run of a seed gives the same model.
//   RAW      out[w] = hash(seed, e)                          packed q values: every code equally likely
//   UNIFORM  out[w] = two bf16 u_e in [lo, hi)               scales (element e = 2w + half, low half first)
//   BIAS     out[w] = two bf16 −(mid + u'_e − 0.5)·s_e       biases: s_e is the scale element e of
//                                                             stream seed2 (recomputed), so w = s·q + b
//                                                             centres near 0
//   VEC_F32  out[w] = f32 u_e in [lo, hi)                    norm weights
// where e counts elements from the start of the whole tensor and u = hash → [0, 1).
// Bindings:  out (words) u32
// Grid: ceil(words / (WG·ITEMS)) workgroups, folded 2-D; lane t writes words base + t + i·WG, i < ITEMS.
#include "lib/common.wgsl"

override WG: u32 = 256;
override ITEMS: u32 = 4;

struct Params {
  words: u32,  // words to write
  word0: u32,  // index of out[0] in the whole tensor (words)
  seed: u32,   // stream of this buffer
  seed2: u32,  // stream of the matching scales (BIAS)
  lo: f32,     // uniform range (UNIFORM, VEC_F32; the scales' range for BIAS)
  hi: f32,
  mid: f32,    // BIAS: (2^bits − 1) / 2, the code at the centre
}
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;

fn pcg(v: u32) -> u32 {
  let s = v * 747796405u + 2891336453u;
  let w = ((s >> ((s >> 28u) + 4u)) ^ s) * 277803737u;
  return (w >> 22u) ^ w;
}

// Two rounds so nearby seeds and nearby elements give unrelated values.
fn hash(seed: u32, e: u32) -> u32 { return pcg(e ^ pcg(seed)); }

fn unit(seed: u32, e: u32) -> f32 { return f32(hash(seed, e) >> 8u) * (1.0 / 16777216.0); }

// f32 → bf16 bits, round to nearest even (values here are finite and normal).
fn bf16(v: f32) -> u32 {
  let b = bitcast<u32>(v);
  return (b + 0x7fffu + ((b >> 16u) & 1u)) >> 16u;
}

fn scale_at(e: u32) -> f32 {
  let s = params.lo + (params.hi - params.lo) * unit(params.seed2, e);
  return bitcast<f32>(bf16(s) << 16u);
}

fn element(e: u32) -> u32 {
#ifdef UNIFORM
  return bf16(params.lo + (params.hi - params.lo) * unit(params.seed, e));
#elif BIAS
  return bf16(-(params.mid + unit(params.seed, e) - 0.5) * scale_at(e));
#else
  return 0u;
#endif
}

fn word(w: u32) -> u32 {
#ifdef RAW
  return hash(params.seed, w);
#elif VEC_F32
  return bitcast<u32>(params.lo + (params.hi - params.lo) * unit(params.seed, w));
#else
  return element(2u * w) | (element(2u * w + 1u) << 16u);
#endif
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let base = wg_linear(wid, nwg) * WG * ITEMS;
  for (var i = 0u; i < ITEMS; i++) {
    let w = base + lid + i * WG;
    if (w < params.words) { out[w] = word(params.word0 + w); }
  }
}
