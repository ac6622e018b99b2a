/**
 * 16-bit float helpers for references and inputs: rounding to f16/bf16, packing two halves per u32 (low
 * half = element 0, the layout every kernel reads), and activation buffers in either dtype.
 * @module
 */
import { f16ToF32, f32ToBf16, f32ToF16 } from "../../loader/safetensors.ts";

export type Half = "f16" | "bf16";
/** Activation dtype: f16 where the adapter has shader-f16, else f32. */
export type ActDtype = "f16" | "f32";

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** bf16 bits → value (exact: a bf16 is the top half of an f32). */
export function bf16ToF32(h: number): number {
  u32[0] = (h & 0xffff) << 16;
  return f32[0];
}

/** Bits of `v` rounded to nearest-even in the given 16-bit format. */
export function halfBits(v: number, kind: Half): number {
  return kind === "f16" ? f32ToF16(v) : f32ToBf16(v);
}

/** Value of 16-bit `bits` in the given format. */
export function halfValue(bits: number, kind: Half): number {
  return kind === "f16" ? f16ToF32(bits) : bf16ToF32(bits);
}

/** `v` rounded to the format (what a kernel sees after the value is stored in it). */
export function roundHalf(v: number, kind: Half): number {
  return halfValue(halfBits(v, kind), kind);
}

/** `v` as stored in an activation of this dtype. */
export function roundAct(v: number, act: ActDtype): number {
  return act === "f16" ? roundHalf(v, "f16") : Math.fround(v);
}

/** Values (already representable, or rounded here) packed two per u32, padded to whole words. */
export function packHalves(values: ArrayLike<number>, kind: Half): Uint32Array {
  const out = new Uint32Array(Math.ceil(values.length / 2));
  for (let i = 0; i < values.length; i++) out[i >> 1] |= halfBits(values[i], kind) << ((i & 1) * 16);
  return out;
}

/** Element i of a two-per-u32 packed array. */
export function halfAt(words: Uint32Array, i: number, kind: Half): number {
  return halfValue((words[i >> 1] >>> ((i & 1) * 16)) & 0xffff, kind);
}

/** Bytes per activation element. */
export function actBytesOf(act: ActDtype): number {
  return act === "f16" ? 2 : 4;
}

/** Encodes values as an activation buffer's bytes (length padded to 4 bytes). */
export function encodeAct(values: ArrayLike<number>, act: ActDtype): Uint8Array {
  if (act === "f32") return new Uint8Array(Float32Array.from(values).buffer);
  return new Uint8Array(packHalves(values, "f16").buffer);
}

/** Decodes `n` activations from bytes read back from the GPU. */
export function decodeAct(bytes: ArrayBuffer, n: number, act: ActDtype): Float64Array {
  const out = new Float64Array(n);
  if (act === "f32") {
    const f = new Float32Array(bytes, 0, n);
    for (let i = 0; i < n; i++) out[i] = f[i];
  } else {
    const h = new Uint16Array(bytes, 0, n);
    for (let i = 0; i < n; i++) out[i] = f16ToF32(h[i]);
  }
  return out;
}
