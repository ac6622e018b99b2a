/** Float64 reference of silu_mul.wgsl. @module */

/** h[r, i] = silu(gu[r, i]) · gu[r, I + i], silu(g) = g / (1 + e^−g). */
export function siluMulRef(gu: Float64Array, R: number, I: number): Float64Array {
  const h = new Float64Array(R * I);
  for (let r = 0; r < R; r++) {
    for (let i = 0; i < I; i++) {
      const g = gu[r * 2 * I + i];
      h[r * I + i] = (g / (1 + Math.exp(-g))) * gu[r * 2 * I + I + i];
    }
  }
  return h;
}
