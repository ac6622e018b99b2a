/** Float64 references of silu_mul.wgsl and add.wgsl. @module */

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

/** y + x, element-wise (y the f32 residual, x an activation). */
export function addRef(y: Float64Array, x: Float64Array): Float64Array {
  return y.map((v, i) => v + x[i]);
}
