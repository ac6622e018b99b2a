// Shared by the mixture-of-experts kernels (moe_group, moe_vec, moe_tiled): the tile height of the grouped
// matmul, the layout of the groups buffer, and the decoding of expert weight words.
//
// Groups buffer (u32), E experts, written by moe_group.wgsl, read by moe_tiled.wgsl:
//   [0, E)        pairs per expert
//   [E, 2E)       first slot of each expert in `order` (exclusive sum of the counts)
//   [2E, 3E]      first tile of each expert (tiles of BM pairs); entry 3E: tiles in all
//   [3E + 1, ...) order: absolute pair indices p = r·k + j, grouped by expert
//
// Weight formats (define): Q4 or Q8, each with QUANT (MLX affine: w = scale·q + bias per GS values along K;
// scales and biases 16-bit, SCALE_F16 or bf16, two per u32 in row-major group order); WF16, WBF16 (two
// values per u32).

#ifdef TILE_ROWS
const BM: u32 = {{TILE_ROWS}}u;   // pair rows per tile of moe_tiled.wgsl: 64, or 16 under SMALL_TILE
#endif

override GS: u32 = 64;

// OR-ing an integer below 2^23 into the mantissa of 2^23 and subtracting 2^23 gives it as f32 exactly,
// without an int→float conversion (slow on GPUs).
fn magic(v: vec4<u32>) -> vec4<f32> {
  return bitcast<vec4<f32>>(v | vec4<u32>(0x4b000000u)) - vec4<f32>(8388608.0);
}

// Nibbles k = 0..3 of a half-word as q·16^k (exact; scaled back by NIB after summing).
fn nib4(h: u32) -> vec4<f32> {
  return magic(vec4<u32>(h) & vec4<u32>(0xfu, 0xf0u, 0xf00u, 0xf000u));
}
const NIB = vec4<f32>(1.0, 0.0625, 0.00390625, 0.000244140625);

// The four bytes of a word, element 0 in the low byte.
fn byte4(wd: u32) -> vec4<f32> {
  return magic((vec4<u32>(wd) >> vec4<u32>(0u, 8u, 16u, 24u)) & vec4<u32>(255u));
}

// The two 16-bit weights of a word (f16 under WF16, else bf16), element 0 in the low half.
fn halves(wd: u32) -> vec2<f32> {
#ifdef WF16
  return unpack2x16float(wd);
#else
  return vec2<f32>(bf16_lo(wd), bf16_hi(wd));
#endif
}
