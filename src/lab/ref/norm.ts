/**
 * Float64 reference of rms_norm.wgsl: y[r, :] = x[src(r), :] · (mean(x[src(r), :]²) + eps)^−½ · weight,
 * src(r) = r, or gather[r] (the final norm over only the rows that need logits). With `y0` (the `add`
 * variant): y = y0 + that.
 * @module
 */

export function rmsNormRef(a: {
  /** (*, H) */
  x: Float64Array;
  weight: Float64Array;
  R: number;
  H: number;
  eps: number;
  gather?: ArrayLike<number>;
  /** (R, H): the rows the norm is added to (rms_norm.wgsl's ADD). */
  y0?: Float64Array;
}): Float64Array {
  const y = a.y0 ? Float64Array.from(a.y0.subarray(0, a.R * a.H)) : new Float64Array(a.R * a.H);
  for (let r = 0; r < a.R; r++) {
    const src = (a.gather ? a.gather[r] : r) * a.H;
    let ss = 0;
    for (let k = 0; k < a.H; k++) ss += a.x[src + k] * a.x[src + k];
    const inv = 1 / Math.sqrt(ss / a.H + a.eps);
    for (let k = 0; k < a.H; k++) y[r * a.H + k] += a.x[src + k] * inv * a.weight[k];
  }
  return y;
}
