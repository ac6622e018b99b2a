// The 8-bit KV cache ("q8"; format and float64 reference in src/lab/ref/kv8.ts): `kv` holds one signed byte
// per element in the act cache's layout, four per u32, and `kvs` one f32 scale per QB consecutive elements of
// a head row (element e's scale is kvs[e / QB]). Symmetric per block: s = amax / 127,
// code = round(x·127/amax).
// Quantizing K/V once when they are written halves the bytes attention reads per key (f16: 2 B, q8: 1.125 B).

override QB: u32 = 32;  // elements per scale (32; 16 or 8 for head dims 32 does not divide)

// 127 / amax: the factor that takes a block's values to codes (0 for a block of zeros: codes 0, s 0).
fn kv8_inv(amax: f32) -> f32 { return select(0.0, 127.0 / amax, amax > 0.0); }

// Four values of one block as codes (round half to even, as the reference).
fn kv8_pack(x: vec4<f32>, inv: f32) -> u32 {
  return pack4xI8(vec4<i32>(clamp(round(x * inv), vec4<f32>(-127.0), vec4<f32>(127.0))));
}

// Four codes as f32, exactly, without int→float conversions (a quarter-rate unit on NVIDIA GPUs): byte
// c + 128 (the sign bit flipped) under the exponent of 2^23 is the float 2^23 + c + 128.
fn kv8_codes(w: u32) -> vec4<f32> {
  let x = w ^ 0x80808080u;
  let m = vec4<u32>(x & 0xffu, (x >> 8u) & 0xffu, (x >> 16u) & 0xffu, x >> 24u) | vec4<u32>(0x4b000000u);
  return bitcast<vec4<f32>>(m) - vec4<f32>(8388736.0);
}

// Four codes back to values: code · s, the f32 product the reference takes.
fn kv8_unpack(w: u32, s: f32) -> vec4<f32> { return kv8_codes(w) * s; }
