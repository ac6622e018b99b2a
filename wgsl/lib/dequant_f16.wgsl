// One 8-value unit of an MLX affine weight as 8 packed halves, shared by dequant_f16.wgsl and
// matmul_sgmat.wgsl's FUSED_DEQUANT so both give the same halves (the includer declares `override BITS`):
//   half_i = f16(s·q_i + b)      q0 the unit's word (4-bit), or q0, q1 its two (8-bit); values little-endian
fn unit_halves(q0: u32, q1: u32, s: f32, b: f32) -> vec4<u32> {
  var lo: vec4<f32>;
  var hi: vec4<f32>;
  if (BITS == 4u) {
    let v = vec4<u32>(q0);
    lo = vec4<f32>((v >> vec4<u32>(0u, 4u, 8u, 12u)) & vec4<u32>(15u));
    hi = vec4<f32>((v >> vec4<u32>(16u, 20u, 24u, 28u)) & vec4<u32>(15u));
  } else {
    let shifts = vec4<u32>(0u, 8u, 16u, 24u);
    lo = vec4<f32>((vec4<u32>(q0) >> shifts) & vec4<u32>(255u));
    hi = vec4<f32>((vec4<u32>(q1) >> shifts) & vec4<u32>(255u));
  }
  let x = fma(vec4<f32>(s), lo, vec4<f32>(b));
  let y = fma(vec4<f32>(s), hi, vec4<f32>(b));
  return vec4<u32>(pack2x16float(x.xy), pack2x16float(x.zw), pack2x16float(y.xy), pack2x16float(y.zw));
}
