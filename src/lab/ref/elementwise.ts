/** Float64 reference of silu_mul.wgsl. @module */

/**
 * h[r, i] = act(gu[r, i]) · gu[r, I + i]: silu(g) = g / (1 + e^−g), or (`gelu_tanh`, Gemma's
 * gelu_pytorch_tanh) 0.5·g·(1 + tanh(√(2/π)·(g + 0.044715·g³))), as defined.
 */
export function siluMulRef(
  gu: Float64Array,
  R: number,
  I: number,
  act: "silu" | "gelu_tanh" = "silu",
): Float64Array {
  const h = new Float64Array(R * I);
  const c = Math.sqrt(2 / Math.PI);
  for (let r = 0; r < R; r++) {
    for (let i = 0; i < I; i++) {
      const g = gu[r * 2 * I + i];
      const a = act === "gelu_tanh"
        ? 0.5 * g * (1 + Math.tanh(c * (g + 0.044715 * g ** 3)))
        : g / (1 + Math.exp(-g));
      h[r * I + i] = a * gu[r * 2 * I + I + i];
    }
  }
  return h;
}
