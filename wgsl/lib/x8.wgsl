// Int8 quantization of x shared by the 4-bit int8-x matmuls (matmul_vec_q4x8.wgsl for decode rows,
// matmul_tiled_x8.wgsl for prefill), so both quantize exactly alike (src/lab/ref/matmul.ts quantizeX8):
// per 32 values sx = max|x| / 127, q = round(x / sx) as int8 in ±127, and Σx kept in f32.
// Each of 4 adjacent lanes holds 8 of a group's 32 values (a, b): the group's max and sum go by shuffles, so
// every lane calls this in uniform control flow. Lane l % 4 = 0 / 2 gets the group's words 0-1 / 2-3 in `w`.
// A word's 8 values are kept as two u32: values 0,2,4,6 and 1,3,5,7, the bytes of (q & 0x0f0f0f0f) and
// (q >> 4) & 0x0f0f0f0f for a word q of 4-bit weights, so one dot4I8Packed takes four products.
struct X8Group { w: vec4<u32>, sx: f32, sum: f32 }

fn x8_group(a: vec4<f32>, b: vec4<f32>) -> X8Group {
  let ms = x8_max_sum(max(abs(a), abs(b)), a + b);
  return X8Group(x8_words(a, b, x8_inv(ms.x)), ms.x / 127.0, ms.y);
}

// The group's max|x| and Σx over its 4 adjacent lanes, from this lane's elementwise max|x| and sums.
fn x8_max_sum(am: vec4<f32>, sv: vec4<f32>) -> vec2<f32> {
  var mx = max(max(am.x, am.y), max(am.z, am.w));
  var sm = (sv.x + sv.y) + (sv.z + sv.w);
  mx = max(mx, subgroupShuffleXor(mx, 1u));
  mx = max(mx, subgroupShuffleXor(mx, 2u));
  sm = sm + subgroupShuffleXor(sm, 1u);
  sm = sm + subgroupShuffleXor(sm, 2u);
  return vec2<f32>(mx, sm);
}

// 127 / max|x| (0 for an all-zero group: its values quantize to 0).
fn x8_inv(mx: f32) -> f32 {
  return select(0.0, 127.0 / mx, mx > 0.0);
}

// The group's four words (see above) from this lane's 8 values scaled by inv.
fn x8_words(a: vec4<f32>, b: vec4<f32>, inv: f32) -> vec4<u32> {
  let qa = vec4<i32>(clamp(round(a * inv), vec4<f32>(-127.0), vec4<f32>(127.0)));
  let qb = vec4<i32>(clamp(round(b * inv), vec4<f32>(-127.0), vec4<f32>(127.0)));
  let e = pack4xI8(vec4<i32>(qa.x, qa.z, qb.x, qb.z));
  let o = pack4xI8(vec4<i32>(qa.y, qa.w, qb.y, qb.w));
  return vec4<u32>(e, o, subgroupShuffleXor(e, 1u), subgroupShuffleXor(o, 1u));
}
