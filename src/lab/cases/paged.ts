/**
 * Random paged KV pools and shuffled page tables shared by the rope and attention cases, and the 8-bit
 * cache's side of them (format: src/lab/ref/kv8.ts): upload, read-back, the reference of what a kernel
 * writes, and its tolerance.
 * @module
 */
import { ShapeError } from "../../errors.ts";
import type { Gpu } from "../../gpu/device.ts";
import type { Tolerance } from "../compare.ts";
import { type BufferSet, readAct, readBytes, readF32 } from "../harness.ts";
import { kvOffset, type PagedKv, type Row } from "../ref/paged.ts";
import { actBytesOf, type ActDtype, encodeAct, roundAct } from "../ref/half.ts";
import { dequantizeKv8, kv8Block, quantizeKv8 } from "../ref/kv8.ts";
import type { Rng } from "../rng.ts";

export interface Pool extends PagedKv {
  numPages: number;
  /** (numPages, 2, nkv, ps, hd) values the kernels read, never zero: act values, or (q8) codes · scales. */
  kv: Float64Array;
  /** 8-bit cache: what is uploaded (`kv` holds its values, so every reference is a function of `kv`). */
  q8?: { codes: Int8Array; scales: Float32Array };
}

/**
 * A pool with `slots` page-table rows covering `lens[s]` positions each. Pages are handed out in a random
 * order, so a sequence's pages are neither contiguous nor increasing, and a few pages stay unused.
 * Unused table entries point at random pages (a kernel that reads past a length reads wrong data).
 */
export function randomPool(
  rng: Rng,
  opts: { lens: number[]; nkv: number; hd: number; ps: number; act: ActDtype; amp?: number; kv8?: boolean },
): Pool {
  const { lens, nkv, hd, ps } = opts;
  if (ps < 1 || !Number.isInteger(ps)) throw new ShapeError(`page size ${ps}`);
  const maxPages = Math.max(1, ...lens.map((l) => Math.ceil(l / ps)));
  const need = lens.reduce((a, l) => a + Math.ceil(l / ps), 0);
  const numPages = need + 3;
  const order = rng.permutation(numPages);
  const pages = new Uint32Array(lens.length * maxPages);
  let next = 0;
  lens.forEach((l, s) => {
    for (let p = 0; p < maxPages; p++) {
      pages[s * maxPages + p] = p < Math.ceil(l / ps) ? order[next++] : rng.int(0, numPages);
    }
  });
  const amp = opts.amp ?? 1;
  const n = numPages * 2 * nkv * ps * hd;
  const table = { pages, maxPages, nkv, ps, hd, numPages };
  if (!opts.kv8) {
    return { ...table, kv: Float64Array.from({ length: n }, () => roundAct(rng.signed(amp), opts.act)) };
  }
  // Head rows are contiguous, so blocks of QB over the flat pool are the format's blocks. Each block draws
  // its own amplitude in [amp/2, amp]: neighbouring scales differ by up to 2×, so a kernel that takes
  // another block's scale is far off. |x| ≥ a/127 ≥ amax/127 keeps every code (and value) nonzero.
  const qb = kv8Block(hd);
  const raw = new Float64Array(n);
  for (let b = 0; b < n / qb; b++) {
    const a = amp * rng.range(0.5, 1);
    for (let e = b * qb; e < (b + 1) * qb; e++) {
      const v = rng.signed(a);
      raw[e] = Math.abs(v) < a / 127 ? Math.sign(v) * (a / 127) : v;
    }
  }
  const q = quantizeKv8(raw, qb);
  return { ...table, kv: q.values, q8: { codes: q.codes, scales: q.scales } };
}

/** Bytes per cached K/V element: act, or (q8) one code plus a quarter of a scale per QB elements. */
export function kvBytes(act: ActDtype, kv8: boolean, hd: number): number {
  return kv8 ? 1 + 4 / kv8Block(hd) : actBytesOf(act);
}

/** The `kv8` shape key: 0 (act cache) or 1 (8-bit cache). */
export function kv8Of(shape: Record<string, number | string>): boolean {
  const v = shape.kv8 ?? 0;
  if (v !== 0 && v !== 1) throw new ShapeError(`shape key kv8 = ${v}: 0 or 1`);
  return v === 1;
}

/** The pool's buffers, as the host wrappers take them (`kvScale` only for a q8 pool). */
export interface KvBuffers {
  kv: GPUBuffer;
  kvScale?: GPUBuffer;
}

/** Uploads the pool: act values, or q8 codes (as bytes) and scales. `mutable`: a kernel writes it. */
export function uploadKv(set: BufferSet, pool: Pool, act: ActDtype, mutable = false): KvBuffers {
  if (!pool.q8) return { kv: set.upload("kv", encodeAct(pool.kv, act), { mutable }) };
  const { codes, scales } = pool.q8;
  return {
    kv: set.upload("kv", new Uint8Array(codes.buffer, codes.byteOffset, codes.byteLength), { mutable }),
    kvScale: set.upload("kv_scale", scales, { mutable }),
  };
}

/** Reads the pool back as values (q8: codes · scales, as the kernels dequantize them). */
export async function readKv(gpu: Gpu, b: KvBuffers, pool: Pool, act: ActDtype): Promise<Float64Array> {
  const n = pool.kv.length;
  if (!b.kvScale) return await readAct(gpu, b.kv, n, act);
  const qb = kv8Block(pool.hd);
  const scales = Float32Array.from(await readF32(gpu, b.kvScale, n / qb));
  return dequantizeKv8(await readBytes(gpu, b.kv, n), scales, n, qb);
}

/** Element offsets of the K and V head rows that rows `which` write at their (slot, pos). */
export function writtenRows(p: PagedKv, rows: Row[], which: number[]): number[] {
  return which.flatMap((r) =>
    Array.from({ length: 2 * p.nkv }, (_, k) => {
      const { slot, pos } = rows[r];
      return kvOffset(p, slot, pos, k < p.nkv ? 0 : 1, k % p.nkv);
    })
  );
}

/**
 * The q8 writers' error on a K/V value x before quantization, on both act paths (they quantize the f32
 * values they compute, never act-rounded ones): rope.wgsl's f32 tolerance, 1e-6 + 2e-6·|x|.
 */
const WRITE_ERR: Tolerance = { atol: 1e-6, rtol: 2e-6 };

/**
 * Tolerance of a pool holding q8 cells written by a kernel, the largest block max being `amax`: the
 * kernel's amax is off by WRITE_ERR(amax), and WGSL's f32 division (amax / 127, 2.5 ulp) by a few ulp more,
 * so its scale moves every value c·s of the block by at most that much (|c| ≤ 127); rtol: the final f32
 * product. Cells not written are copied bits (exact). Codes are not given ±1 here: quantizeWritten
 * accepts the other code only where the kernel's error can cross a rounding boundary.
 */
export function kv8Tolerance(amax: number): Tolerance {
  return { atol: WRITE_ERR.atol + (WRITE_ERR.rtol + 2 ** -21) * amax, rtol: 2 ** -23 };
}

/**
 * The reference of a q8 kernel's writes: each head row at `offs` of the reference pool `kv` (float64, as
 * ropeRef leaves it) quantized in place over its blocks (the rest of the pool was quantized at upload). A
 * value within the kernel's own error (WRITE_ERR, before and through its amax) of a rounding boundary may
 * take either code: there the reference takes the one nearer the GPU's value `got` (so a tie the kernel
 * broke the other way passes, and attention is checked over the keys it really wrote), and a wrong scale
 * or code anywhere else still fails. Returns the tolerance for the pool (kv8Tolerance) and how many values
 * took the other code.
 */
export function quantizeWritten(
  kv: Float64Array,
  offs: number[],
  hd: number,
  got?: Float64Array,
): { tol: Tolerance; flipped: number } {
  const qb = kv8Block(hd);
  const err = (x: number) => WRITE_ERR.atol + WRITE_ERR.rtol * Math.abs(x);
  let amaxAll = 0, flipped = 0;
  for (const o of offs) {
    const x = Float64Array.from(kv.subarray(o, o + hd), Math.fround);
    const q = quantizeKv8(x, qb);
    for (let b = 0; b < hd / qb; b++) {
      let amax = 0;
      for (let e = b * qb; e < (b + 1) * qb; e++) amax = Math.max(amax, Math.abs(x[e]));
      amaxAll = Math.max(amaxAll, amax);
      const inv = amax > 0 ? Math.fround(127 / amax) : 0;
      for (let e = b * qb; e < (b + 1) * qb; e++) {
        const y = Math.fround(x[e] * inv), c = q.codes[e];
        kv[o + e] = q.values[e];
        if (!got || amax === 0) continue;
        // How far y may move, in codes: its own error and its amax's (y = 127·x / amax), plus f32 rounding
        // of 127 / amax (2.5 ulp in WGSL) and of the product.
        const slack = (127 * err(x[e]) + Math.abs(y) * err(amax)) / amax + 1e-4;
        const alt = c + (y >= c ? 1 : -1);
        if (0.5 - Math.abs(y - c) > slack || Math.abs(alt) > 127) continue;
        const v = Math.fround(alt * q.scales[b]);
        if (Math.abs(got[o + e] - v) < Math.abs(got[o + e] - q.values[e])) {
          kv[o + e] = v;
          flipped++;
        }
      }
    }
  }
  return { tol: kv8Tolerance(amaxAll), flipped };
}
