// Shared prelude: enable directives and the activation type. Included first by every kernel.
//   F16 defined  -> activations and KV cache in f16 (adapter has shader-f16); accumulation stays f32.
//   otherwise    -> everything f32.
#ifdef F16
enable f16;
#endif
#ifdef SUBGROUPS_DIRECTIVE
enable subgroups;
#endif
#ifdef F16
alias act = f16;
alias act2 = vec2<f16>;
alias act4 = vec4<f16>;
#else
alias act = f32;
alias act2 = vec2<f32>;
alias act4 = vec4<f32>;
#endif

// One step row: token id, absolute position, sequence slot, kind (0 prefill, 1 decode).
struct Row { token: u32, pos: u32, slot: u32, kind: u32 }

// bf16 halves of a packed word (low half = element 0): exact, a bf16 is the top 16 bits of an f32.
fn bf16_lo(u: u32) -> f32 { return bitcast<f32>(u << 16u); }
fn bf16_hi(u: u32) -> f32 { return bitcast<f32>(u & 0xffff0000u); }

// The 16-bit scale or bias of group `g` (two per word, element 0 low) of an MLX-quantized weight, from the
// word holding it: f16 with SCALE_F16, else bf16.
fn half_at(word: u32, g: u32) -> f32 {
#ifdef SCALE_F16
  return unpack2x16float(word)[g & 1u];
#else
  return select(bf16_lo(word), bf16_hi(word), (g & 1u) == 1u);
#endif
}

// Linear workgroup index for grids folded into 2-D because of the 65535 limit.
fn wg_linear(wid: vec3<u32>, nwg: vec3<u32>) -> u32 { return wid.x + wid.y * nwg.x; }

// SiLU (the SwiGLU gate), one formula for the separate kernel and the matmul epilogue.
fn silu(g: f32) -> f32 { return g / (1.0 + exp(-g)); }
