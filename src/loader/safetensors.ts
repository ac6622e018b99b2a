/**
 * safetensors: header parsing and validation (single file and sharded with `model.safetensors.index.json`),
 * plus a writer for the converter. Tensor bytes are never loaded here; `TensorEntry` says where they are so
 * the uploader can stream them to the GPU.
 * @module
 */
import { LoaderError } from "../errors.ts";
import type { ModelSource } from "../platform/mod.ts";

export type DType = "BF16" | "F16" | "F32" | "U32" | "I32" | "U8" | "I8" | "F64" | "I64" | "U16" | "I16";

export const DTYPE_BYTES: Record<DType, number> = {
  BF16: 2,
  F16: 2,
  F32: 4,
  U32: 4,
  I32: 4,
  U8: 1,
  I8: 1,
  F64: 8,
  I64: 8,
  U16: 2,
  I16: 2,
};

export interface TensorEntry {
  name: string;
  file: string;
  dtype: DType;
  shape: number[];
  /** Absolute byte offset of the data in `file`. */
  offset: number;
  byteLength: number;
}

export interface TensorIndex {
  tensors: Map<string, TensorEntry>;
  /** `__metadata__` of the first file (e.g. {"format": "mlx"}). */
  metadata: Record<string, string>;
}

const MAX_HEADER = 100 * 1024 * 1024;

/** Reads and validates one safetensors header. */
export async function readHeader(source: ModelSource, file: string): Promise<TensorIndex> {
  const where = `${source.name}/${file}`;
  const size = await source.size(file);
  if (size === null) throw new LoaderError(where, null, "file not found");
  if (size < 8) {
    throw new LoaderError(where, null, `file is ${size} bytes, too short for a safetensors header`);
  }
  const lenBytes = await source.read(file, 0, 8);
  const n = Number(new DataView(lenBytes.buffer, lenBytes.byteOffset, 8).getBigUint64(0, true));
  if (n > MAX_HEADER || 8 + n > size) {
    throw new LoaderError(
      where,
      "header",
      `header length ${n} does not fit in a ${size}-byte file (truncated?)`,
    );
  }
  let json: Record<string, any>;
  try {
    json = JSON.parse(new TextDecoder().decode(await source.read(file, 8, n)));
  } catch (e) {
    throw new LoaderError(where, "header", `header is not valid JSON (${(e as Error).message})`);
  }
  const dataStart = 8 + n;
  const tensors = new Map<string, TensorEntry>();
  const metadata: Record<string, string> = json.__metadata__ ?? {};
  const spans: [number, number, string][] = [];
  for (const [name, t] of Object.entries(json)) {
    if (name === "__metadata__") continue;
    if (!t || typeof t !== "object") throw new LoaderError(where, name, "tensor entry is not an object");
    const dtype = t.dtype as DType;
    if (!(dtype in DTYPE_BYTES)) {
      throw new LoaderError(
        where,
        name,
        `unsupported dtype ${JSON.stringify(t.dtype)} (expected BF16, F16, F32, U32, I32)`,
      );
    }
    if (
      !Array.isArray(t.shape) || !t.shape.every((d: unknown) => Number.isInteger(d) && (d as number) >= 0)
    ) {
      throw new LoaderError(
        where,
        name,
        `shape ${JSON.stringify(t.shape)} is not a list of non-negative integers`,
      );
    }
    const off = t.data_offsets;
    if (!Array.isArray(off) || off.length !== 2 || !off.every((d: unknown) => Number.isInteger(d))) {
      throw new LoaderError(where, name, `data_offsets ${JSON.stringify(off)} is not [begin, end]`);
    }
    const [b, e] = off as [number, number];
    const want = t.shape.reduce((a: number, d: number) => a * d, 1) * DTYPE_BYTES[dtype];
    if (e < b || e - b !== want) {
      throw new LoaderError(
        where,
        name,
        `data_offsets [${b}, ${e}] hold ${e - b} bytes but ${dtype} ${JSON.stringify(t.shape)} needs ${want}`,
      );
    }
    if (dataStart + e > size) {
      throw new LoaderError(
        where,
        name,
        `data ends at byte ${dataStart + e} but the file has ${size} bytes (truncated?)`,
      );
    }
    spans.push([b, e, name]);
    tensors.set(name, { name, file, dtype, shape: t.shape, offset: dataStart + b, byteLength: e - b });
  }
  spans.sort((a, b) => a[0] - b[0]);
  for (let i = 1; i < spans.length; i++) {
    if (spans[i][0] < spans[i - 1][1]) {
      throw new LoaderError(where, spans[i][2], `data overlaps tensor ${spans[i - 1][2]}`);
    }
  }
  return { tensors, metadata };
}

/** All tensors of a model folder: `model.safetensors`, or the shards named by the index file. */
export async function readTensorIndex(source: ModelSource): Promise<TensorIndex> {
  const files = await source.list();
  if (files.includes("model.safetensors.index.json")) {
    let index: any;
    try {
      index = JSON.parse(await source.readText("model.safetensors.index.json"));
    } catch (e) {
      throw new LoaderError(
        `${source.name}/model.safetensors.index.json`,
        null,
        `not valid JSON (${(e as Error).message})`,
      );
    }
    const map = index?.weight_map;
    if (!map || typeof map !== "object") {
      throw new LoaderError(
        `${source.name}/model.safetensors.index.json`,
        "weight_map",
        "missing or not an object",
      );
    }
    const shards = [...new Set(Object.values(map) as string[])].sort();
    const all = new Map<string, TensorEntry>();
    let metadata: Record<string, string> = {};
    for (const shard of shards) {
      if (!files.includes(shard)) {
        throw new LoaderError(
          `${source.name}/model.safetensors.index.json`,
          "weight_map",
          `names shard ${shard}, which is missing`,
        );
      }
      const h = await readHeader(source, shard);
      if (all.size === 0) metadata = h.metadata;
      for (const [k, v] of h.tensors) all.set(k, v);
    }
    for (const [name, shard] of Object.entries(map)) {
      if (!all.has(name)) {
        throw new LoaderError(`${source.name}/${shard}`, name, "listed in the index but not in the shard");
      }
    }
    return { tensors: all, metadata };
  }
  const single = files.filter((f) => f.endsWith(".safetensors"));
  if (single.length === 0) {
    throw new LoaderError(source.name, null, "no .safetensors file in the model folder");
  }
  const all = new Map<string, TensorEntry>();
  let metadata: Record<string, string> = {};
  for (const f of single) {
    const h = await readHeader(source, f);
    if (all.size === 0) metadata = h.metadata;
    for (const [k, v] of h.tensors) all.set(k, v);
  }
  return { tensors: all, metadata };
}

/** Reads one whole tensor into memory (small tensors: norms, biases, goldens). */
export async function readTensorBytes(source: ModelSource, t: TensorEntry): Promise<Uint8Array> {
  return await source.read(t.file, t.offset, t.byteLength);
}

/** Decodes a BF16/F16/F32 tensor's bytes to Float32Array. */
export function toFloat32(bytes: Uint8Array, dtype: DType): Float32Array {
  const n = bytes.byteLength / DTYPE_BYTES[dtype];
  const out = new Float32Array(n);
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (dtype === "F32") { for (let i = 0; i < n; i++) out[i] = dv.getFloat32(4 * i, true); }
  else if (dtype === "BF16") {
    const u = new Uint32Array(1);
    const f = new Float32Array(u.buffer);
    for (let i = 0; i < n; i++) {
      u[0] = dv.getUint16(2 * i, true) << 16;
      out[i] = f[0];
    }
  } else if (dtype === "F16") { for (let i = 0; i < n; i++) out[i] = f16ToF32(dv.getUint16(2 * i, true)); }
  else throw new Error(`toFloat32: ${dtype} is not a float dtype`);
  return out;
}

export function f16ToF32(h: number): number {
  const s = h & 0x8000 ? -1 : 1;
  const e = (h >> 10) & 0x1f;
  const m = h & 0x3ff;
  if (e === 0) return s * m * 2 ** -24;
  if (e === 31) return m ? NaN : s * Infinity;
  return s * (1 + m / 1024) * 2 ** (e - 15);
}

const f32buf = new Float32Array(1);
const u32buf = new Uint32Array(f32buf.buffer);

/** f32 → f16 bits, round to nearest even (values beyond the f16 range become ±Inf). */
export function f32ToF16(v: number): number {
  f32buf[0] = v;
  const x = u32buf[0];
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  let mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  let e = exp - 127 + 15;
  if (e >= 31) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    let r = mant >>> shift;
    const rem = mant & ((1 << shift) - 1);
    const halfway = 1 << (shift - 1);
    if (rem > halfway || (rem === halfway && (r & 1))) r++;
    return sign | r;
  }
  let r = mant >>> 13;
  const rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && (r & 1))) {
    r++;
    if (r === 0x400) {
      r = 0;
      e++;
      if (e >= 31) return sign | 0x7c00;
    }
  }
  return sign | (e << 10) | r;
}

/** f32 → bf16 bits, round to nearest even. */
export function f32ToBf16(v: number): number {
  f32buf[0] = v;
  const x = u32buf[0];
  if ((x & 0x7f800000) === 0x7f800000 && (x & 0x7fffff)) return (x >>> 16) | 0x40;
  return ((x + 0x7fff + ((x >>> 16) & 1)) >>> 16) & 0xffff;
}

/** Serialises tensors as one safetensors file (header padded to 8 bytes, data in the given order). */
export function encodeSafetensors(
  tensors: { name: string; dtype: DType; shape: number[]; data: Uint8Array }[],
  metadata: Record<string, string> = {},
): Uint8Array[] {
  const header: Record<string, unknown> = { __metadata__: metadata };
  let off = 0;
  for (const t of tensors) {
    const want = t.shape.reduce((a, d) => a * d, 1) * DTYPE_BYTES[t.dtype];
    if (want !== t.data.byteLength) {
      throw new Error(`${t.name}: ${t.data.byteLength} bytes for ${t.dtype}${JSON.stringify(t.shape)}`);
    }
    header[t.name] = { dtype: t.dtype, shape: t.shape, data_offsets: [off, off + t.data.byteLength] };
    off += t.data.byteLength;
  }
  let json = JSON.stringify(header);
  const pad = (8 - (new TextEncoder().encode(json).byteLength % 8)) % 8;
  json += " ".repeat(pad);
  const hb = new TextEncoder().encode(json);
  const len = new Uint8Array(8);
  new DataView(len.buffer).setBigUint64(0, BigInt(hb.byteLength), true);
  return [len, hb, ...tensors.map((t) => t.data)];
}
