/**
 * Random weight matrices in every format the kernels read, split into row shards (the loader's answer to
 * the binding limit), and their upload as a `Linear`.
 * @module
 */
import { ShapeError } from "../../errors.ts";
import { AFFINE_BITS, AFFINE_GROUP_SIZES } from "../../loader/quantize.ts";
import type { Linear, WeightFormat } from "../../ops/linear.ts";
import type { BufferSet } from "../harness.ts";
import { halfKind, type PackedWeights, packedWords } from "../ref/quant.ts";
import { packHalves } from "../ref/half.ts";
import type { Rng } from "../rng.ts";

export interface ShardData {
  n0: number;
  n: number;
  packed: PackedWeights;
}

/** Throws unless `f` is a format the kernels support for rows of K values. */
export function checkFormat(f: WeightFormat, K: number, op: string): void {
  if (f.kind !== "q") return;
  if (!AFFINE_BITS.includes(f.bits) || !AFFINE_GROUP_SIZES.includes(f.groupSize)) {
    throw new ShapeError(
      `${op}: q${f.bits}g${f.groupSize} (bits ${AFFINE_BITS.join("/")}, groups ${
        AFFINE_GROUP_SIZES.join("/")
      })`,
    );
  }
  if (K % f.groupSize !== 0) {
    throw new ShapeError(`${op}: K=${K} is not a multiple of the group size ${f.groupSize}`);
  }
}

/**
 * An (N, K) matrix whose values are about U(−amp, amp): quantized rows are random words (every q value
 * occurs) with random-sign scales and biases centring the range; 16-bit rows are random values.
 * Split into at least `minShards` row shards, more if one would exceed `maxBinding` bytes; shards start on
 * multiples of 64 rows as the loader's do (a bias slice is then a 256-byte aligned binding).
 */
export function randomWeights(
  rng: Rng,
  f: WeightFormat,
  N: number,
  K: number,
  opts: { amp: number; minShards: number; maxBinding: number },
): ShardData[] {
  const rowBytes = packedWords(f, 1, K).w * 4;
  const count = Math.max(opts.minShards, Math.ceil((N * rowBytes) / (opts.maxBinding * 0.9)));
  const per = Math.ceil(N / count / 64) * 64;
  if (per * (count - 1) >= N) {
    throw new ShapeError(`${count} shards of 64-row multiples do not fit ${N} rows`);
  }
  const shards: ShardData[] = [];
  for (let n0 = 0; n0 < N; n0 += per) {
    const n = Math.min(per, N - n0);
    shards.push({ n0, n, packed: randomPacked(rng, f, n, K, opts.amp) });
  }
  return shards;
}

function randomPacked(rng: Rng, f: WeightFormat, n: number, K: number, amp: number): PackedWeights {
  if (f.kind !== "q") {
    const v = new Float64Array(n * K);
    for (let i = 0; i < v.length; i++) v[i] = rng.signed(amp);
    return { w: packHalves(v, f.kind) };
  }
  const groups = (n * K) / f.groupSize;
  const top = (1 << f.bits) - 1;
  const s = new Float64Array(groups);
  const b = new Float64Array(groups);
  for (let g = 0; g < groups; g++) {
    // Negative scales occur in MLX checkpoints (the larger-magnitude edge maps to q = 0).
    s[g] = ((2 * amp) / top) * rng.range(0.5, 1.5) * (rng.next() < 0.5 ? -1 : 1);
    b[g] = -s[g] * (top / 2) * rng.range(0.8, 1.2);
  }
  const kind = halfKind(f);
  return { w: rng.words(packedWords(f, n, K).w), scales: packHalves(s, kind), biases: packHalves(b, kind) };
}

/** Uploads shards as a `Linear` (the structure the host wrappers take). */
export function uploadLinear(
  set: BufferSet,
  name: string,
  f: WeightFormat,
  N: number,
  K: number,
  shards: ShardData[],
  bias?: Float64Array,
): Linear {
  return {
    name,
    N,
    K,
    format: f,
    shards: shards.map((s, i) => ({
      n0: s.n0,
      n: s.n,
      w: set.upload(`${name}.w${i}`, s.packed.w),
      scales: s.packed.scales && set.upload(`${name}.scales${i}`, s.packed.scales),
      biases: s.packed.biases && set.upload(`${name}.biases${i}`, s.packed.biases),
    })),
    bias: bias && set.upload(`${name}.bias`, Float32Array.from(bias)),
  };
}
