// Embedding gather: x[r, :] = table[rows[r].token, :] for r < R, dequantized to f32 (the residual stream).
//
// Weight formats (define): QUANT        affine MLX quantization, BITS per value, GS values per group:
//                                        w = scale·q + bias, q packed little-endian into u32 rows of
//                                        H·BITS/32 words
//                          WF16 / WBF16  two 16-bit floats per u32 (element 0 in the low half)
// Bindings:  rows   (R)              step rows; .token selects the table row
//            w      (V, H·BITS/32) u32 | (V, H/2) u32
//            scales (V, H/GS) 16-bit packed in u32 (QUANT only; SCALE_F16 or bf16), biases likewise
//            x      (R, H) f32
// Grid: (R, ceil(H / WG)); one lane per output element. Rows whose token is outside [row_lo, row_hi)
// are skipped: a table split across buffers (2 GiB binding limit) is gathered by one dispatch per shard.
#include "lib/common.wgsl"

override WG: u32 = 64;
override BITS: u32 = 4;
override GS: u32 = 64;

struct Params {
  R: u32,       // rows
  H: u32,       // hidden size (elements)
  row_lo: u32,  // first table row held by this shard
  row_hi: u32,  // one past the last table row of this shard
  scale: f32,   // multiplies every element (Gemma scales embeddings by √hidden; 1 elsewhere, exact)
}
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> rows: array<Row>;
@group(0) @binding(2) var<storage, read> w: array<u32>;
#ifdef QUANT
@group(0) @binding(3) var<storage, read> scales: array<u32>;
@group(0) @binding(4) var<storage, read> biases: array<u32>;
#endif
@group(0) @binding(5) var<storage, read_write> x: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let r = wid.x;
  let k = wid.y * WG + lid;
  if (r >= params.R || k >= params.H) { return; }
  let tok = rows[r].token;
  if (tok < params.row_lo || tok >= params.row_hi) { return; }
  let n = tok - params.row_lo;
  let H = params.H;
#ifdef QUANT
  let bitpos = k * BITS;                       // bit offset of element k inside its row
  let base = n * (H * BITS / 32u);             // first word of the row
  let word = base + (bitpos >> 5u);
  let sh = bitpos & 31u;
  var q = w[word] >> sh;
  if (sh + BITS > 32u) { q = q | (w[word + 1u] << (32u - sh)); }  // 3/5/6-bit values straddle words
  q = q & ((1u << BITS) - 1u);
  let gi = n * (H / GS) + k / GS;
  let s = half_at(scales[gi >> 1u], gi);
  let b = half_at(biases[gi >> 1u], gi);
  x[r * H + k] = (s * f32(q) + b) * params.scale;
#else
  let i = n * H + k;
  let u = w[i >> 1u];
#ifdef WF16
  x[r * H + k] = unpack2x16float(u)[i & 1u] * params.scale;
#else
  x[r * H + k] = select(bf16_lo(u), bf16_hi(u), (i & 1u) == 1u) * params.scale;
#endif
#endif
}
