/**
 * Helpers of the quantization and converter tests (test/loader/quantize_test.ts, convert_test.ts): MLX's
 * rounding written independently of src/loader/quantize.ts, and an element-wise comparison.
 * @module
 */
import { expect } from "vitest";

/** Round half to even, written independently of the implementation under test. */
export function rintEven(x: number): number {
  const f = Math.floor(x);
  const d = x - f;
  return d < 0.5 ? f : d > 0.5 ? f + 1 : f % 2 === 0 ? f : f + 1;
}

/** How many elements of `a` and `b` (of equal length) differ. */
export function countMismatches(a: ArrayLike<number>, b: ArrayLike<number>): number {
  expect(a.length).toBe(b.length);
  let n = 0;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) n++;
  return n;
}
