/**
 * Ceilings measured on the current adapter: streaming-read bandwidth (GB/s) and matmul compute rate
 * (GFLOP/s, f32 and f16; GOP/s on int8 with integer dot products). The kernel lab and the benchmark report
 * kernels as a fraction of these.
 * Timing goes through harness.ts (timestamp queries when the adapter has them, otherwise wall clock over
 * many dispatches per submit); each measurement is several dispatches per pass so short kernels on fast
 * GPUs are not lost in pass overhead.
 * @module
 */
import type { Gpu } from "../gpu/device.ts";
import { grid1d } from "../gpu/kernel.ts";
import { type OpContext, record } from "../ops/context.ts";
import { BufferSet, readAct, readF32, seal, timeBound, type Timing } from "./harness.ts";
import { Rng } from "./rng.ts";
import { readBuffer } from "../gpu/readback.ts";
import { encodeAct } from "./ref/half.ts";

export interface Ceilings {
  adapter: string;
  /** Best streaming read, GB/s (10^9 bytes/s), and the workgroup size that gave it. */
  readGBs: number;
  readWG: number;
  /** Tiled matmul rates, GFLOP/s; f16 is null without shader-f16. */
  f32GFlops: number;
  f16GFlops: number | null;
  /**
   * The same tiled matmul on int8 with dot4I8Packed, GOP/s (a multiply-add counts 2, as in GFLOP/s): the
   * ceiling of the int8-x prefill matmuls. Null where integer dot products or subgroups (the int8-x path's
   * gate) are missing.
   */
  int8GOps: number | null;
  method: Timing["method"];
}

const cache = new WeakMap<Gpu, Promise<Ceilings>>();

/** Measures (once per device) the read-bandwidth and matmul ceilings. */
export function measureCeilings(gpu: Gpu): Promise<Ceilings> {
  let c = cache.get(gpu);
  if (!c) {
    c = measure(gpu);
    cache.set(gpu, c);
    c.catch(() => cache.delete(gpu));
  }
  return c;
}

async function measure(gpu: Gpu): Promise<Ceilings> {
  let best = { gbs: 0, wg: 0 };
  let method: Timing["method"] = "wall";
  for (const wg of [256, 512]) {
    if (wg > gpu.info.maxInvocations) continue;
    const r = await probeRead(gpu, { wg });
    method = r.method;
    if (r.gbs > best.gbs) best = { gbs: r.gbs, wg };
  }
  const f32 = await probeMatmul(gpu, { half: false });
  const f16 = gpu.info.f16 ? await probeMatmul(gpu, { half: true }) : null;
  const i8 = gpu.info.subgroups && gpu.info.int8Dot
    ? await probeMatmul(gpu, { half: false, int8: true })
    : null;
  return {
    adapter: gpu.info.adapter,
    readGBs: best.gbs,
    readWG: best.wg,
    f32GFlops: f32.gflops,
    f16GFlops: f16?.gflops ?? null,
    int8GOps: i8?.gflops ?? null,
    method,
  };
}

/** Dispatches per timed pass so that a pass lasts about `targetMs` (at most 64). */
function repsFor(ms: number, targetMs: number): number {
  return Math.max(1, Math.min(64, Math.ceil(targetMs / Math.max(ms, 1e-3))));
}

/** Streams `bytes` (default: the largest binding, at most 256 MiB) with workgroups of `wg` lanes. */
export async function probeRead(
  gpu: Gpu,
  opts: { wg?: number; bytes?: number; iters?: number } = {},
): Promise<{ gbs: number; ms: number; method: Timing["method"] }> {
  const wg = opts.wg ?? 256;
  const bytes =
    Math.floor(Math.min(opts.bytes ?? 256 * 2 ** 20, gpu.info.maxBinding, gpu.info.maxBuffer) / 16) * 16;
  const set = new BufferSet(gpu);
  const n = bytes / 16;
  const rng = new Rng(5);
  const data = new Uint32Array(n * 4);
  for (let i = 0; i < data.length; i += 1021) data[i] = rng.u32() | 1; // cheap: the values do not matter
  const src = set.upload("probe.src", data);
  // Enough lanes to fill any GPU; each reads n / stride vec4s.
  const stride = Math.min(n, 1 << 20);
  const out = set.upload("probe.out", new Uint32Array(stride));
  const run = async (reps: number) => {
    const ctx = set.context();
    for (let i = 0; i < reps; i++) {
      await record(ctx, { file: "probe_read.wgsl", overrides: { WG: wg } }, {
        buffers: { src, out },
        params: { n, stride, magic: 0x9e3779b9 },
        grid: grid1d(Math.ceil(stride / wg)),
      });
    }
    return await timed(set, ctx, opts.iters ?? 5, reps);
  };
  try {
    const first = await run(1);
    const t = await run(repsFor(first.ms, 20));
    return { gbs: bytes / (t.ms * 1e6), ms: t.ms, method: t.method };
  } finally {
    set.destroy();
  }
}

/**
 * C = A·B on n×n matrices (default: sized so one dispatch takes a few ms, n ≤ 2048) in f32 or f16, or
 * (int8) C = A·Bᵀ on int8 matrices through probe_matmul_i8.wgsl (rate in GOP/s, exact in i32).
 * `verify` checks C against a float64 product (for tests; keep n small then).
 */
export async function probeMatmul(
  gpu: Gpu,
  opts: { half: boolean; int8?: boolean; n?: number; iters?: number; verify?: boolean },
): Promise<{ gflops: number; ms: number; n: number; maxRelErr: number | null }> {
  const measureAt = async (n: number, reps: number) => {
    const set = new BufferSet(gpu);
    try {
      const rng = new Rng(n);
      if (opts.int8) return await measureI8(set, rng, n, reps);
      const A = Float64Array.from({ length: n * n }, () => rng.signed(1));
      const B = Float64Array.from({ length: n * n }, () => rng.signed(1));
      const dt = opts.half ? "f16" : "f32";
      const a = set.upload("probe.a", encodeAct(A, dt));
      const b = set.upload("probe.b", encodeAct(B, dt));
      const c = set.upload("probe.c", new Uint32Array((n * n * (opts.half ? 2 : 4)) / 4));
      const ctx = set.context();
      for (let i = 0; i < reps; i++) {
        await record(ctx, { file: "probe_matmul.wgsl", defines: opts.half ? { HALF: 1 } : {} }, {
          buffers: { a, b, c },
          params: { n },
          grid: [n / 64, n / 64, 1],
        });
      }
      const t = await timed(set, ctx, opts.iters ?? 5, reps);
      let maxRelErr: number | null = null;
      if (opts.verify) {
        const got = opts.half ? await readAct(gpu, c, n * n, "f16") : await readF32(gpu, c, n * n);
        maxRelErr = 0;
        for (let i = 0; i < n; i++) {
          for (let j = 0; j < n; j++) {
            let s = 0, mag = 0;
            for (let k = 0; k < n; k++) {
              s += A[i * n + k] * B[k * n + j];
              mag += Math.abs(A[i * n + k] * B[k * n + j]);
            }
            maxRelErr = Math.max(maxRelErr, Math.abs(got[i * n + j] - s) / mag);
          }
        }
      }
      return { ms: t.ms, maxRelErr };
    } finally {
      set.destroy();
    }
  };
  // Int8: A and Bᵀ random in ±127 (never zero rows), packed 4 per word; C checked exactly (maxRelErr 0 when
  // every entry matches).
  const measureI8 = async (set: BufferSet, rng: Rng, n: number, reps: number) => {
    const A = Int8Array.from({ length: n * n }, () => rng.int(-127, 128));
    const B = Int8Array.from({ length: n * n }, () => rng.int(-127, 128));
    const a = set.upload("probe.a", new Uint32Array(A.buffer));
    const b = set.upload("probe.b", new Uint32Array(B.buffer));
    const c = set.upload("probe.c", new Uint32Array(n * n));
    const ctx = set.context();
    for (let i = 0; i < reps; i++) {
      await record(ctx, { file: "probe_matmul_i8.wgsl" }, {
        buffers: { a, b, c },
        params: { n },
        grid: [n / 64, n / 64, 1],
      });
    }
    const t = await timed(set, ctx, opts.iters ?? 5, reps);
    let maxRelErr: number | null = null;
    if (opts.verify) {
      const got = new Int32Array(await readBuffer(gpu, c, 0, n * n * 4));
      let bad = 0;
      for (let i = 0; i < n; i++) {
        for (let j = 0; j < n; j++) {
          let s = 0;
          for (let k = 0; k < n; k++) s += A[i * n + k] * B[j * n + k];
          if (got[i * n + j] !== s) bad++;
        }
      }
      maxRelErr = bad / (n * n);
    }
    return { ms: t.ms, maxRelErr };
  };
  let n = opts.n ?? 512;
  let r = await measureAt(n, 1);
  if (opts.n === undefined) {
    // Grow to 2048 unless one dispatch already takes ≥ 20 ms (software adapters), and time the size that ran
    // fastest (512 has only 64 workgroups: too few for a large GPU).
    let best = { n, ms: r.ms };
    while (r.ms < 20 && n < 2048) {
      n *= 2;
      r = await measureAt(n, 1);
      if (n ** 3 / r.ms > best.n ** 3 / best.ms) best = { n, ms: r.ms };
    }
    n = best.n;
    // Best of three timed passes: a ceiling is the best the device does, and its clocks sometimes dip for a
    // while.
    r = await measureAt(n, repsFor(best.ms, 20));
    for (let t = 0; t < 2; t++) {
      const again = await measureAt(n, repsFor(best.ms, 20));
      if (again.ms < r.ms) r = again;
    }
  }
  return { gflops: (2 * n ** 3) / (r.ms * 1e6), ms: r.ms, n, maxRelErr: r.maxRelErr };
}

/**
 * Median ms per dispatch over `iters` passes of `reps` dispatches each (the dispatches recorded in `ctx`).
 */
async function timed(
  set: BufferSet,
  ctx: OpContext,
  iters: number,
  reps: number,
): Promise<{ ms: number; method: Timing["method"] }> {
  const t = await timeBound(seal(set, ctx, { maxKvLen: 1 }, () => Promise.resolve({})), iters);
  ctx.arena.destroy();
  return { ms: t.medianMs / reps, method: t.method };
}
