// Shared by the vector matmuls (decode rows: matmul_vec.wgsl, matmul_vec_q4.wgsl, matmul_vec_q4x8.wgsl):
// shapes, params, the x and gamma bindings, the row norm factor and the 16-bit scale decode. The output
// binding and the epilogue: lib/matmul.wgsl.

override WG: u32 = 128;
override T: u32 = 8;         // lanes per team, dividing WG
override BITS: u32 = 4;
override GS: u32 = 64;
const MB: u32 = {{ROWS_PER_BLOCK}}u;     // rows per block (≤ 4: the components of a vec4 accumulator)

struct Params {
  M: u32,      // rows
  N: u32,      // output columns held by this weight buffer
  K: u32,      // reduction length (elements)
  row0: u32,   // first row of x and y used (rows)
  ldy: u32,    // row stride of y (elements)
  n_off: u32,  // column of y where this weight's output starts (elements)
  eps: f32,    // RMSNorm epsilon (NORM)
}
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
#ifdef NORM
@group(0) @binding(7) var<storage, read> gamma: array<vec4<f32>>;
#endif

// Row norm factor from Σx² (NORM), else 1.
fn norm_factor(ss: f32) -> f32 {
#ifdef NORM
  return inverseSqrt(ss / f32(params.K) + params.eps);
#else
  return 1.0;
#endif
}
