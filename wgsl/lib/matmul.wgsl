// Pieces shared by the matmul kernels (included after their params struct; reads params.ldy, params.n_off):
// the output bindings, the 16-bit scale decode and the epilogue.

// Output: y (rows, ldy): f32 for OUT_F32 and ADD (the residual), act otherwise; BIAS: bias (N) f32.
#ifdef BIAS
@group(0) @binding(5) var<storage, read> bias: array<f32>;
#endif
#ifdef OUT_F32
@group(0) @binding(6) var<storage, read_write> y: array<f32>;
#elif ADD
@group(0) @binding(6) var<storage, read_write> y: array<f32>;
#else
@group(0) @binding(6) var<storage, read_write> y: array<act>;
#endif

// One 16-bit float (bf16, or f16 with SCALE_F16) held in the low half of a word.
fn half16(h: u32) -> f32 {
#ifdef SCALE_F16
  return unpack2x16float(h).x;
#else
  return bitcast<f32>(h << 16u);
#endif
}

// The epilogue of every matmul kernel:  y[row, n_off + n] (=|+=) v (+ bias[n]), row absolute (row0 added).
// OUT_F32 → y f32;  ADD → y f32 and y += v (the residual add);  else y act.  BIAS → + bias[n] (f32).
fn store(row: u32, n: u32, v0: f32) {
  var v = v0;
#ifdef BIAS
  v += bias[n];
#endif
  let yi = row * params.ldy + params.n_off + n;
#ifdef ADD
  y[yi] = y[yi] + v;
#elif OUT_F32
  y[yi] = v;
#else
  y[yi] = act(v);
#endif
}
