/**
 * MLX affine quantization, operation for operation as MLX's CPU `mx.quantize(w, group_size, bits)` does it
 * (the `quantize` loop of `mlx/backend/cpu/quantized.cpp`; the `affine_quantize` fallback in `mlx/ops.cpp`
 * computes the same). Checked against that source, not against an MLX run (none is available here). MLX's
 * Metal kernel can differ in rare cases: it rounds ties away from zero and starts its max at 0, so an
 * all-negative group gets max = 0. Pure functions, no I/O: the converter feeds them one tensor at a time.
 *
 * Layout (what the WGSL kernels and MLX read back):
 * - groups of `groupSize` consecutive values along the last (input) axis, one scale and bias per group, and
 *   `w ≈ scale·q + bias` with q unsigned in [0, 2^bits − 1];
 * - each row of q is one little-endian bit stream: bit b of element i is stream bit i·bits + b, and stream
 *   bit n is bit n % 32 of U32 word n / 32. For 2/4/8 bits that is "32/bits values per word, element 0 in
 *   the low bits"; for 3/5/6 bits values straddle word boundaries (MLX writes them as 3- or 5-byte packs,
 *   which is the same stream).
 *
 * Not every "MLX" checkpoint was made by this algorithm: test/fixtures/qwen3-mlx-4bit used a plain min/max
 * quantizer (bias = group min, bf16-rounded scale); test/loader/convert_test.ts shows both and the
 * difference.
 * @module
 */

/** Bit widths MLX affine quantization supports. */
export const AFFINE_BITS: readonly number[] = [2, 3, 4, 5, 6, 8];
/** Group sizes MLX affine quantization supports. */
export const AFFINE_GROUP_SIZES: readonly number[] = [32, 64, 128];

/** One quantized matrix: packed q, and per-group scales and biases (float32, before any storage cast). */
export interface AffineQuantized {
  /** `[rows, cols·bits/32]` packed q values. */
  weight: Uint32Array;
  /** `[rows, cols/groupSize]`; negative when the group's larger-magnitude edge is its maximum. */
  scales: Float32Array;
  /** `[rows, cols/groupSize]`; the edge value that q = 0 reproduces exactly (or 0). */
  biases: Float32Array;
}

const fround = Math.fround;
// MLX: `float eps = 1e-7;`, the floor on a group's step so constant groups do not divide by zero.
const EPS = fround(1e-7);

/** std::rint under the default rounding mode: nearest, ties to even (Math.round breaks ties upward). */
function rint(x: number): number {
  const r = Math.round(x);
  return r - x === 0.5 && (r & 1) !== 0 ? r - 1 : r;
}

function checkShape(rows: number, cols: number, bits: number, groupSize: number): void {
  if (!AFFINE_BITS.includes(bits)) {
    throw new RangeError(`bits ${bits} not supported (${AFFINE_BITS.join(", ")})`);
  }
  if (!AFFINE_GROUP_SIZES.includes(groupSize)) {
    throw new RangeError(`group size ${groupSize} not supported (${AFFINE_GROUP_SIZES.join(", ")})`);
  }
  if (!Number.isInteger(rows) || rows < 0 || !Number.isInteger(cols) || cols <= 0 || cols % groupSize !== 0) {
    throw new RangeError(
      `shape [${rows}, ${cols}]: the last dim must be a positive multiple of ${groupSize}`,
    );
  }
}

/**
 * Quantizes a row-major `[rows, cols]` matrix exactly as MLX does. All arithmetic is float32 (every step is
 * rounded with Math.fround, which gives the correctly rounded float32 result for + − ÷), and q is computed
 * from the float32 scale/bias *before* they are cast to the storage dtype: MLX casts (bf16/f16) only when
 * writing `scales[i]`/`biases[i]`. Callers store scales/biases in the model dtype themselves.
 *
 * Note the quantizer snaps the larger-magnitude edge onto q = 0 (bias = edge, scale = edge/q0 so that 0.0
 * lands exactly on an integer q); the far edge can then overshoot 2^bits − 1 by up to one step and is
 * clipped, so the worst-case error of a group is |scale|, not |scale|/2.
 */
export function quantizeAffine(
  w: Float32Array,
  rows: number,
  cols: number,
  bits: number,
  groupSize: number,
): AffineQuantized {
  checkShape(rows, cols, bits, groupSize);
  if (w.length !== rows * cols) throw new RangeError(`${w.length} values for shape [${rows}, ${cols}]`);
  const nBins = (1 << bits) - 1;
  const nGroups = (rows * cols) / groupSize;
  const q = new Uint8Array(rows * cols);
  const scales = new Float32Array(nGroups);
  const biases = new Float32Array(nGroups);
  for (let g = 0; g < nGroups; g++) {
    const start = g * groupSize;
    let wMin = Infinity;
    let wMax = -Infinity;
    for (let j = 0; j < groupSize; j++) {
      const v = w[start + j];
      if (v > wMax) wMax = v;
      if (v < wMin) wMin = v;
    }
    const mask = Math.abs(wMin) > Math.abs(wMax);
    let scale = fround(fround(wMax - wMin) / nBins);
    if (scale < EPS) scale = EPS;
    if (!mask) scale = -scale;
    const edge = mask ? wMin : wMax;
    const q0 = rint(fround(edge / scale));
    let bias = 0;
    if (q0 !== 0) {
      scale = fround(edge / q0);
      bias = edge;
    }
    scales[g] = scale;
    biases[g] = bias;
    for (let j = 0; j < groupSize; j++) {
      const v = rint(fround(fround(w[start + j] - bias) / scale));
      q[start + j] = v > 0 ? (v < nBins ? v : nBins) : 0; // also maps NaN to 0
    }
  }
  return { weight: packAffine(q, rows, cols, bits), scales, biases };
}

/** Packs q values (row-major `[rows, cols]`, each < 2^bits) into `[rows, cols·bits/32]` U32 words. */
export function packAffine(q: Uint8Array, rows: number, cols: number, bits: number): Uint32Array {
  if (q.length !== rows * cols || (cols * bits) % 32 !== 0) {
    throw new RangeError(`${q.length} values for shape [${rows}, ${cols}] at ${bits} bits`);
  }
  // Rows are whole words (cols·bits is a multiple of 32), so one stream over the matrix equals per-row
  // streams.
  const weight = new Uint32Array((rows * cols * bits) / 32);
  for (let i = 0, bit = 0; i < q.length; i++, bit += bits) {
    const word = bit >>> 5;
    const off = bit & 31;
    weight[word] |= q[i] << off;
    if (off + bits > 32) weight[word + 1] |= q[i] >>> (32 - off);
  }
  return weight;
}

/** The q values (one per weight, row-major `[rows, cols]`) held in a packed `[rows, cols·bits/32]` matrix. */
export function unpackAffine(weight: Uint32Array, rows: number, cols: number, bits: number): Uint8Array {
  if (weight.length !== (rows * cols * bits) / 32) {
    throw new RangeError(`${weight.length} words for ${rows}×${cols} ${bits}-bit values`);
  }
  const mask = (1 << bits) - 1;
  const q = new Uint8Array(rows * cols);
  for (let i = 0, bit = 0; i < q.length; i++, bit += bits) {
    const word = bit >>> 5;
    const off = bit & 31;
    let v = weight[word] >>> off;
    if (off + bits > 32) v |= weight[word + 1] << (32 - off);
    q[i] = v & mask;
  }
  return q;
}

/**
 * `scale·q + bias` for every weight, in float32 (MLX's dequantize computes in the scales' dtype; with
 * float32 scales that is this exact value).
 */
export function dequantizeAffine(
  weight: Uint32Array,
  scales: Float32Array,
  biases: Float32Array,
  rows: number,
  cols: number,
  bits: number,
  groupSize: number,
): Float32Array {
  checkShape(rows, cols, bits, groupSize);
  const nGroups = (rows * cols) / groupSize;
  if (scales.length !== nGroups || biases.length !== nGroups) {
    throw new RangeError(`need ${nGroups} scales and biases, got ${scales.length} and ${biases.length}`);
  }
  const q = unpackAffine(weight, rows, cols, bits);
  const out = new Float32Array(rows * cols);
  for (let i = 0; i < out.length; i++) {
    const g = Math.floor(i / groupSize);
    out[i] = fround(scales[g] * q[i]) + biases[g];
  }
  return out;
}
