/**
 * GPU time of a dispatch list, run many times in one compute pass. Under Deno every wait on the queue costs
 * ~10 ms whatever it waits for, so one dispatch per wait measures the
 * wait. With `timestamp-query` the pass is timed on the GPU; without it, wall-clock runs of r and 2r
 * repetitions are differenced, which cancels the fixed cost of the wait.
 * @module
 */
import type { Gpu } from "../src/gpu/device.ts";
import { type Dispatch, encodeDispatches, type StepShape } from "../src/gpu/kernel.ts";

export interface Timing {
  /** Milliseconds per execution of the list (median of `samples`). */
  ms: number;
  reps: number;
  samples: number[];
  method: "timestamp" | "wall-diff";
}

export interface TimerOptions {
  /** GPU time each sample should last, so launch and wait costs are amortized (default 100 ms). */
  targetMs?: number;
  /** Samples per measurement, median taken (default 3). */
  samples?: number;
  /** Upper bound on repetitions per pass (default 4096). */
  maxReps?: number;
  /** Force wall-clock differencing even when timestamps exist. */
  wall?: boolean;
}

export class GpuTimer {
  readonly #query: GPUQuerySet | null;
  readonly #resolve: GPUBuffer | null;
  readonly #read: GPUBuffer | null;
  readonly targetMs: number;
  readonly samples: number;
  readonly maxReps: number;
  #timestamps: boolean;

  constructor(readonly gpu: Gpu, opts: TimerOptions = {}) {
    this.targetMs = opts.targetMs ?? 100;
    this.samples = opts.samples ?? 3;
    this.maxReps = opts.maxReps ?? 4096;
    const d = gpu.device;
    // Scratch of the benchmark, not of the engine: made outside the memory ledger so the peak stays the
    // engine's.
    if (gpu.info.timestamps && !opts.wall) {
      this.#query = d.createQuerySet({ type: "timestamp", count: 2 });
      this.#resolve = d.createBuffer({
        size: 16,
        usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC,
      });
      this.#read = d.createBuffer({ size: 16, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    } else {
      this.#query = this.#resolve = this.#read = null;
    }
    this.#timestamps = !!this.#query;
  }

  get method(): Timing["method"] {
    return this.#timestamps ? "timestamp" : "wall-diff";
  }

  /** Time per execution of `list`; `step` feeds grid functions (decode attention's KV length). */
  async time(list: readonly Dispatch[], step: StepShape = { maxKvLen: 0 }): Promise<Timing> {
    // The first run warms caches and clocks; the second calibrates the repetition count.
    await this.#run(list, step, 1);
    const one = await this.#run(list, step, 1);
    // Encoding costs ~3 µs per dispatch: cap the pass at ~20k dispatches.
    const cap = Math.min(this.maxReps, Math.max(1, Math.floor(20000 / Math.max(1, list.length))));
    let reps: number;
    if (this.#timestamps) {
      reps = Math.max(1, Math.min(cap, Math.ceil(this.targetMs / Math.max(one.gpu!, 1e-3))));
    } else {
      // The wall clock of one run is mostly the wait: grow until the work itself fills the target.
      reps = 1;
      while (reps < cap && (await this.#run(list, step, reps)).wall - one.wall < this.targetMs) {
        reps = Math.min(cap, reps * 4);
      }
    }
    const samples: number[] = [];
    for (let i = 0; i < this.samples; i++) {
      if (this.#timestamps) {
        const r = await this.#run(list, step, reps);
        // A long pass whose timestamps disagree with the wall clock: the counter is not in ns here. On Dawn
        // a short GPU time in a long wall is the JS thread's stall (bench/NOTES.md #117), not the counter.
        const short = r.gpu! < 0.5 * r.wall && this.gpu.info.webgpu !== "dawn";
        if (r.wall > 40 && (short || r.gpu! > 1.05 * r.wall)) {
          console.error(
            `[bench] timestamps say ${r.gpu!.toFixed(1)} ms for a ${
              r.wall.toFixed(1)
            } ms pass; using wall-clock timing`,
          );
          this.#timestamps = false;
          return await this.time(list, step);
        }
        samples.push(r.gpu! / reps);
      } else {
        const a = await this.#run(list, step, reps);
        const b = await this.#run(list, step, 2 * reps);
        samples.push(Math.max(b.wall - a.wall, 1e-6) / reps);
      }
    }
    return { ms: median(samples), reps, samples, method: this.method };
  }

  /**
   * Milliseconds for `reps` executions: GPU time of the pass (with timestamps) and wall time to completion.
   */
  async #run(
    list: readonly Dispatch[],
    step: StepShape,
    reps: number,
  ): Promise<{ gpu: number | null; wall: number }> {
    const d = this.gpu.device;
    const ts = this.#timestamps;
    const enc = d.createCommandEncoder({ label: "bench" });
    const pass = enc.beginComputePass({
      label: "bench",
      timestampWrites: ts
        ? { querySet: this.#query!, beginningOfPassWriteIndex: 0, endOfPassWriteIndex: 1 }
        : undefined,
    });
    for (let r = 0; r < reps; r++) encodeDispatches(pass, list, step);
    pass.end();
    if (ts) {
      enc.resolveQuerySet(this.#query!, 0, 2, this.#resolve!, 0);
      enc.copyBufferToBuffer(this.#resolve!, 0, this.#read!, 0, 16);
    }
    const t0 = performance.now();
    d.queue.submit([enc.finish()]);
    if (!ts) {
      await d.queue.onSubmittedWorkDone();
      return { gpu: null, wall: performance.now() - t0 };
    }
    await this.#read!.mapAsync(GPUMapMode.READ);
    const wall = performance.now() - t0;
    const t = new BigUint64Array(this.#read!.getMappedRange().slice(0));
    this.#read!.unmap();
    return { gpu: Number(t[1] - t[0]) / 1e6, wall };
  }

  destroy(): void {
    this.#query?.destroy();
    this.#resolve?.destroy();
    this.#read?.destroy();
  }
}

export function median(xs: number[]): number {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}
