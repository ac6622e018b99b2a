/**
 * GPU side of the kernel lab: buffers from host arrays, a bound case (dispatches recorded through the real
 * host wrapper), running it with its mutable buffers restored first, reading outputs back, and timing.
 * Platform-neutral: the CLI, the tests and the browser page share it.
 * @module
 */
import type { Gpu } from "../gpu/device.ts";
import { encodeDispatches, ParamArena, type StepShape } from "../gpu/kernel.ts";
import { readBuffer } from "../gpu/readback.ts";
import type { OpContext } from "../ops/context.ts";
import { overrideShaderSource } from "../platform/mod.ts";
import { type ActDtype, decodeAct } from "./ref/half.ts";

/** A case's kernels recorded on the device, ready to run any number of times. */
export interface Bound {
  ctx: OpContext;
  step: StepShape;
  /** Buffers the kernels write that are also inputs (y of a residual add, the KV pool, slot state):
   * restored from a pristine copy before every run so runs are identical. */
  mutable: { buffer: GPUBuffer; pristine: GPUBuffer; size: number; control: boolean }[];
  /** Outputs after a run, by name (float64, or integers for id/state buffers). */
  read(): Promise<Record<string, Float64Array>>;
  destroy(): void;
}

/** Buffers of one bound case, destroyed together. */
export class BufferSet {
  readonly #bufs: GPUBuffer[] = [];
  readonly mutable: Bound["mutable"] = [];
  constructor(readonly gpu: Gpu) {}

  /**
   * A storage buffer holding `data` (padded to 16 bytes; never zero-sized). `mutable`: the kernels write it
   * and read it, so it is restored before each run; "control" when its contents steer the kernels' control
   * flow (sampler slot state), so even wall-clock timing must restore it.
   */
  upload(label: string, data: ArrayBufferView, opts: { mutable?: boolean | "control" } = {}): GPUBuffer {
    const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    const size = Math.max(16, Math.ceil(bytes.byteLength / 16) * 16);
    const mk = (l: string) => {
      const b = this.gpu.memory.create("other", {
        label: l,
        size,
        usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST,
      });
      if (bytes.byteLength) this.gpu.device.queue.writeBuffer(b, 0, bytes);
      this.#bufs.push(b);
      return b;
    };
    const buf = mk(label);
    if (opts.mutable) {
      this.mutable.push({
        buffer: buf,
        pristine: mk(`${label}.pristine`),
        size,
        control: opts.mutable === "control",
      });
    }
    return buf;
  }

  /** An uninitialised-looking scratch buffer (filled with a pattern, not zeros). */
  scratch(label: string, bytes: number): GPUBuffer {
    const words = new Uint32Array(Math.max(4, Math.ceil(bytes / 4)));
    words.fill(0x7fc00001); // a NaN pattern: a read of unwritten scratch poisons the result
    return this.upload(label, words);
  }

  /** A fresh recording context for the host wrappers. */
  context(): OpContext {
    return { gpu: this.gpu, arena: new ParamArena(this.gpu), list: [] };
  }

  destroy(): void {
    for (const b of this.#bufs) this.gpu.memory.destroy(b);
    this.#bufs.length = 0;
  }
}

/** Reads `n` activations (act dtype) as float64. */
export async function readAct(gpu: Gpu, buf: GPUBuffer, n: number, act: ActDtype): Promise<Float64Array> {
  const bytes = await readBuffer(gpu, buf, 0, Math.ceil((n * (act === "f16" ? 2 : 4)) / 4) * 4);
  return decodeAct(bytes, n, act);
}

/** Reads `n` f32 values as float64. */
export async function readF32(gpu: Gpu, buf: GPUBuffer, n: number): Promise<Float64Array> {
  return Float64Array.from(new Float32Array(await readBuffer(gpu, buf, 0, n * 4)));
}

/** Reads `n` bytes (8-bit data: the q8 KV cache's codes). */
export async function readBytes(gpu: Gpu, buf: GPUBuffer, n: number): Promise<Uint8Array> {
  return new Uint8Array(await readBuffer(gpu, buf, 0, n));
}

/** Reads `n` u32 values (as float64, so every output compares the same way). */
export async function readU32(gpu: Gpu, buf: GPUBuffer, n: number): Promise<Float64Array> {
  return Float64Array.from(new Uint32Array(await readBuffer(gpu, buf, 0, n * 4)));
}

/** Seals a bound case: uploads its params and takes pristine copies of its mutable buffers. */
export function seal(set: BufferSet, ctx: OpContext, step: StepShape, read: Bound["read"]): Bound {
  ctx.arena.flush();
  const enc = set.gpu.device.createCommandEncoder({ label: "lab.seal" });
  for (const m of set.mutable) enc.copyBufferToBuffer(m.buffer, 0, m.pristine, 0, m.size);
  set.gpu.device.queue.submit([enc.finish()]);
  return {
    ctx,
    step,
    mutable: set.mutable,
    read,
    destroy: () => {
      ctx.arena.destroy();
      set.destroy();
    },
  };
}

function restore(enc: GPUCommandEncoder, b: Bound, onlyControl = false): void {
  for (const m of b.mutable) {
    if (!onlyControl || m.control) enc.copyBufferToBuffer(m.pristine, 0, m.buffer, 0, m.size);
  }
}

/** Runs the case once from its pristine state (the outputs are then read with `b.read()`). */
export function runOnce(b: Bound): void {
  const gpu = b.ctx.gpu;
  const enc = gpu.device.createCommandEncoder({ label: "lab.run" });
  restore(enc, b);
  const pass = enc.beginComputePass({ label: "lab.run" });
  encodeDispatches(pass, b.ctx.list, b.step);
  pass.end();
  gpu.device.queue.submit([enc.finish()]);
}

export interface Timing {
  /** Median milliseconds per run. */
  medianMs: number;
  samples: number[];
  method: "timestamps" | "wall";
}

/**
 * Times `iters` runs. With timestamp queries (unless `wall`) each run is its own compute pass bracketed by
 * timestamps (the state restore copies sit outside the passes); otherwise wall clock over batches of runs
 * per submit, since one wait per run would measure the ≥10 ms `mapAsync` latency instead of the kernel.
 */
export async function timeBound(b: Bound, iters: number, wall = false): Promise<Timing> {
  const gpu = b.ctx.gpu;
  const dev = gpu.device;
  runOnce(b); // warm-up (first-use costs)
  await dev.queue.onSubmittedWorkDone();
  if (gpu.info.timestamps && !wall) {
    const qs = dev.createQuerySet({ type: "timestamp", count: 2 * iters });
    const resolve = gpu.memory.create("staging", {
      label: "lab.ts",
      size: 16 * iters,
      usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC,
    });
    const enc = dev.createCommandEncoder({ label: "lab.time" });
    for (let i = 0; i < iters; i++) {
      restore(enc, b);
      const pass = enc.beginComputePass({
        label: "lab.time",
        timestampWrites: { querySet: qs, beginningOfPassWriteIndex: 2 * i, endOfPassWriteIndex: 2 * i + 1 },
      });
      encodeDispatches(pass, b.ctx.list, b.step);
      pass.end();
    }
    enc.resolveQuerySet(qs, 0, 2 * iters, resolve, 0);
    dev.queue.submit([enc.finish()]);
    const t = new BigUint64Array(await readBuffer(gpu, resolve, 0, 16 * iters));
    gpu.memory.destroy(resolve);
    qs.destroy();
    const samples = Array.from({ length: iters }, (_, i) => Number(t[2 * i + 1] - t[2 * i]) / 1e6);
    // Some adapters report 0 for every pass; fall back to the wall clock then.
    if (samples.some((s) => s > 0)) return { medianMs: median(samples), samples, method: "timestamps" };
  }
  return await wallTime(b, iters);
}

async function wallTime(b: Bound, iters: number): Promise<Timing> {
  const dev = b.ctx.gpu.device;
  const batches = Math.min(5, iters);
  const per = Math.max(1, Math.round(iters / batches));
  const samples: number[] = [];
  for (let k = 0; k < batches; k++) {
    const t0 = performance.now();
    const enc = dev.createCommandEncoder({ label: "lab.wall" });
    // Restores only state that steers control flow (sampler slots): other copies would be timed too.
    for (let i = 0; i < per; i++) {
      restore(enc, b, true);
      const pass = enc.beginComputePass({ label: "lab.wall" });
      encodeDispatches(pass, b.ctx.list, b.step);
      pass.end();
    }
    dev.queue.submit([enc.finish()]);
    await dev.queue.onSubmittedWorkDone();
    samples.push((performance.now() - t0) / per);
  }
  return { medianMs: median(samples), samples, method: "wall" };
}

export function median(a: number[]): number {
  const s = [...a].sort((x, y) => x - y);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/**
 * Runs `fn` with `file`'s WGSL replaced by `text` (kernel lab edits), then puts the original back. Compiled
 * variants of the file are dropped before and after; an edited `lib/` file drops every kernel.
 */
export async function withShader<T>(gpu: Gpu, file: string, text: string, fn: () => Promise<T>): Promise<T> {
  const drop = () => gpu.kernels.invalidate(file.startsWith("lib/") ? "" : file);
  overrideShaderSource(file, text);
  drop();
  try {
    return await fn();
  } finally {
    overrideShaderSource(file, null);
    drop();
  }
}
