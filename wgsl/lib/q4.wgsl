// Q4 helpers of matmul_vec.wgsl (included after its bindings: they read x, scales and biases).
// Q4 without int→float conversions (slow on GPUs): OR-ing nibble k of a half-word into the mantissa of 2^23
// gives 2^23 + q·16^k exactly; products are summed per nibble position and scaled by 16^-k once per unit.
// 2^23 + q·16^k for the four nibbles of a half-word, minus 2^23: q·16^k exactly, no conversion.
fn magic4(h: u32) -> vec4<f32> {
  let v = (vec4<u32>(h) & vec4<u32>(0xfu, 0xf0u, 0xf00u, 0xf000u)) | vec4<u32>(0x4b000000u);
  return bitcast<vec4<f32>>(v) - vec4<f32>(8388608.0);
}
fn nib8lo(wd: u32) -> vec4<f32> { return vec4<f32>(vec4<u32>(wd, wd >> 4u, wd >> 8u, wd >> 12u) & vec4<u32>(15u)); }
fn nib8hi(wd: u32) -> vec4<f32> { return vec4<f32>(vec4<u32>(wd >> 16u, wd >> 20u, wd >> 24u, wd >> 28u) & vec4<u32>(15u)); }
#if Q4
// (Σ q·x, Σ x) of one 32-value Q4 unit against x[xb .. xb+8) (vec4 index). Named values only: arrays in
// this hot loop end up in local memory on some compilers.
fn q4dot(q: vec4<u32>, xb: u32) -> vec2<f32> {
  let x0 = x[xb];
  let x1 = x[xb + 1u];
  let x2 = x[xb + 2u];
  let x3 = x[xb + 3u];
  let x4 = x[xb + 4u];
  let x5 = x[xb + 5u];
  let x6 = x[xb + 6u];
  let x7 = x[xb + 7u];
  let sx = ((x0 + x1) + (x2 + x3)) + ((x4 + x5) + (x6 + x7));
  // The same dot code as the single-row path's q4dot8: batched rows get bit-identical results.
  let d = q4dot8(q, x0, x1, x2, x3, x4, x5, x6, x7);
  return vec2<f32>(d, sx.x + sx.y + sx.z + sx.w);
}

// Σ q·x of one Q4 unit against x values already in registers (shared by the R4 columns of a lane).
fn q4dot8(q: vec4<u32>, x0: vec4<f32>, x1: vec4<f32>, x2: vec4<f32>, x3: vec4<f32>,
          x4: vec4<f32>, x5: vec4<f32>, x6: vec4<f32>, x7: vec4<f32>) -> f32 {
#if QMAGIC
  var pk = magic4(q.x & 0xffffu) * x0;
  pk = fma(magic4(q.x >> 16u), x1, pk);
  pk = fma(magic4(q.y & 0xffffu), x2, pk);
  pk = fma(magic4(q.y >> 16u), x3, pk);
  pk = fma(magic4(q.z & 0xffffu), x4, pk);
  pk = fma(magic4(q.z >> 16u), x5, pk);
  pk = fma(magic4(q.w & 0xffffu), x6, pk);
  pk = fma(magic4(q.w >> 16u), x7, pk);
  return dot(pk, vec4<f32>(1.0, 0.0625, 0.00390625, 0.000244140625));
#else
  return (dot(nib8lo(q.x), x0) + dot(nib8hi(q.x), x1)) + (dot(nib8lo(q.y), x2) + dot(nib8hi(q.y), x3)) +
         (dot(nib8lo(q.z), x4) + dot(nib8hi(q.z), x5)) + (dot(nib8lo(q.w), x6) + dot(nib8hi(q.w), x7));
#endif
}

fn scale_bias(n: u32, u: u32, gpr: u32) -> vec2<f32> {
  let gi = n * gpr + (u * 32u) / GS;
  return vec2<f32>(half_at(scales[gi >> 1u], gi), half_at(biases[gi >> 1u], gi));
}
#endif

