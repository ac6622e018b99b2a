/**
 * Host wrapper of the matmul family: `matmul_vec.wgsl` for decode-like rows (weights streamed once for all
 * rows) and `matmul_tiled.wgsl` for prefill chunks. The caller picks the mode by row kind, not by count, so
 * a row's result never depends on what else is in the batch.
 * @module
 */
import { grid1d } from "../gpu/kernel.ts";
import { check, type OpContext, record } from "./context.ts";
import { formatVariant, type Linear } from "./linear.ts";

export interface MatmulArgs {
  /** Activations (rows, K), act dtype. */
  x: GPUBuffer;
  w: Linear;
  /** Output (rows, ldy): act for "act", f32 for "f32" and "add" (y += x·Wᵀ, the residual add). */
  y: GPUBuffer;
  M: number;
  out: "act" | "f32" | "add";
  mode: "vec" | "tiled";
  /** First row of x and y (default 0). */
  row0?: number;
  /** Row stride of y in elements (default N). */
  ldy?: number;
  /** Column of y where this weight's output starts (default 0): several weights can fill one buffer. */
  nOff?: number;
}

/** y[row0+m, nOff+n] (=|+=) Σ_k x[row0+m, k]·W[n, k] (+ bias[n]). */
export async function matmul(ctx: OpContext, a: MatmulArgs): Promise<void> {
  const { w, M } = a;
  const K = w.K;
  const unit = w.format.kind === "q" ? 32 : 8;
  check(K % unit === 0, "matmul", `${w.name}: K=${K} must be a multiple of ${unit}`);
  check(M > 0, "matmul", `${w.name}: M=${M}`);
  const ldy = a.ldy ?? w.N;
  const nOff = a.nOff ?? 0;
  check(nOff + w.N <= ldy, "matmul", `${w.name}: columns ${nOff}+${w.N} exceed ldy=${ldy}`);
  const { defines, overrides } = formatVariant(w.format, a.mode);
  if (a.out === "f32") defines.OUT_F32 = 1;
  if (a.out === "add") defines.ADD = 1;
  if (w.bias) defines.BIAS = 1;
  for (const s of w.shards) {
    const buffers: Record<string, any> = { x: a.x, w: s.w, y: a.y };
    if (s.scales) buffers.scales = s.scales;
    if (s.biases) buffers.biases = s.biases;
    if (w.bias) buffers.bias = { buffer: w.bias, offset: s.n0 * 4, size: s.n * 4 };
    const params = { M, N: s.n, K, row0: a.row0 ?? 0, ldy, n_off: nOff + s.n0 };
    if (a.mode === "vec") {
      const units = K / unit;
      const T = Math.min(64, Math.max(4, nextPow2(Math.ceil(units / 2))));
      const WG = Math.max(128, T);
      const rowsPerWg = WG / T;
      await record(ctx, { file: "matmul_vec.wgsl", defines, overrides: { ...overrides, WG, T } }, {
        buffers,
        params,
        grid: grid1d(Math.ceil(s.n / rowsPerWg)),
      });
    } else {
      const TM = 4;
      const tile = 16 * TM;
      await record(ctx, { file: "matmul_tiled.wgsl", defines: { ...defines, TM }, overrides }, {
        buffers,
        params,
        grid: [Math.ceil(s.n / tile), Math.ceil(M / tile), 1],
      });
    }
  }
}

function nextPow2(n: number): number {
  let p = 1;
  while (p < n) p *= 2;
  return p;
}
