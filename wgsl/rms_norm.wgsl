// RMSNorm: y[r, :] = x[src(r), :] · rsqrt(mean(x[src(r), :]²) + eps) · weight, computed in f32.
//   for rows r = row0 .. row0+R; src(r) = r, or idx[r] with GATHER (final norm over only the rows that need
//   logits). row0 > 0: a step's prefill rows only (its decode rows fuse the norm into their matmul).
// ADD: y[r, :] += that instead (Gemma's post-attention and post-feedforward norms: the sublayer's output x
//   is normed before it joins the residual y).
// Bindings:  x      (*, H) f32, the residual stream
//            idx    (R) u32            (GATHER only)
//            weight (H) f32            norm weights (checkpoints storing w-1 were fixed at load)
//            y      (R, H) f32: a matmul input (f32 so matmuls need no f16→f32 conversions); ADD: the
//                   residual, read and written (not the same buffer as x)
// Grid: (R); one workgroup of WG lanes per row, each lane a strided slice of H.
#include "lib/common.wgsl"

override WG: u32 = 128;
#include "lib/reduce.wgsl"

struct Params {
  R: u32,     // rows
  H: u32,     // row length (elements)
  eps: f32,
  row0: u32,  // first row (y and, without GATHER, x)
}
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
#ifdef GATHER
@group(0) @binding(2) var<storage, read> idx: array<u32>;
#endif
@group(0) @binding(3) var<storage, read> weight: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let r = params.row0 + wid.x;
  let H = params.H;
#ifdef GATHER
  let src = idx[wid.x] * H;
#else
  let src = r * H;
#endif
  var ss = 0.0;
  for (var k = lid; k < H; k += WG) {
    let v = x[src + k];
    ss = fma(v, v, ss);
  }
  let total = wg_sum(ss, lid);
  let inv = inverseSqrt(total / f32(H) + params.eps);
  for (var k = lid; k < H; k += WG) {
#ifdef ADD
    y[r * H + k] += x[src + k] * inv * weight[k];
#else
    y[r * H + k] = x[src + k] * inv * weight[k];
#endif
  }
}
