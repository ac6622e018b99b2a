// Shared by rope.wgsl and the fused decode path of attention_decode.wgsl (one formula for both).

// cos/sin of an f32 angle, reduced to [-π, π] first (GPU sin/cos are only accurate there). 2π is split in
// three parts whose products with k are exact for |k| < 2^16, so no step relies on a fused fma (WGSL does
// not promise one; lavapipe's is unfused, which cost 2e-4 at position 2047).
fn cos_sin(a: f32) -> vec2<f32> {
  let k = round(a * 0.15915494309189535);
  var r = a - k * 6.28125;            // 201/32
  r = r - k * 1.9378662109375e-3;     // 127/2^16
  r = r - k * -2.5590313e-6;          // 2π − the two above
  return vec2<f32>(cos(r), sin(r));
}
