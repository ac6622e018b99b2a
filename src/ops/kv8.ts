/**
 * The 8-bit KV cache's block size, shared by the host wrappers, the KV pool and the references (format:
 * wgsl/lib/kv8.wgsl, float64 reference: src/lab/ref/kv8.ts).
 * @module
 */
import { ShapeError } from "../errors.ts";

/** Elements per scale for head dim `hd` (a multiple of 8: decode lanes hold 8 dims of one block). */
export function kv8Block(hd: number): number {
  if (hd % 8 !== 0) throw new ShapeError(`8-bit KV cache: head dim ${hd} is not a multiple of 8`);
  return hd % 32 === 0 ? 32 : hd % 16 === 0 ? 16 : 8;
}
