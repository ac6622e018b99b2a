/**
 * Reading GPU buffers back. Each `mapAsync` costs ≥10 ms under Deno, so the decode loop batches its
 * reads (see engine/scheduler.ts); this helper is for tests, eval and one-off reads.
 * @module
 */
import type { Gpu } from "./device.ts";

/** Copies `size` bytes of `src` from `offset` and returns them once the GPU is done. */
export async function readBuffer(
  gpu: Gpu,
  src: GPUBuffer,
  offset: number,
  size: number,
): Promise<ArrayBuffer> {
  const staging = gpu.memory.create("staging", {
    label: "readback",
    size: Math.ceil(size / 4) * 4,
    usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
  });
  const enc = gpu.device.createCommandEncoder({ label: "readback" });
  enc.copyBufferToBuffer(src, offset, staging, 0, Math.ceil(size / 4) * 4);
  gpu.device.queue.submit([enc.finish()]);
  await staging.mapAsync(GPUMapMode.READ);
  const out = staging.getMappedRange().slice(0, size);
  staging.unmap();
  gpu.memory.destroy(staging);
  return out;
}

/** A MAP_READ buffer reused across reads (the decode loop keeps a small pool of these). */
export class StagingBuffer {
  readonly buffer: GPUBuffer;
  constructor(readonly gpu: Gpu, readonly size: number) {
    this.buffer = gpu.memory.create("staging", {
      label: "staging",
      size: Math.ceil(size / 4) * 4,
      usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
    });
  }
  /** Maps, copies out `bytes`, unmaps. */
  async read(bytes: number): Promise<ArrayBuffer> {
    await this.buffer.mapAsync(GPUMapMode.READ, 0, Math.ceil(bytes / 4) * 4);
    const out = this.buffer.getMappedRange(0, Math.ceil(bytes / 4) * 4).slice(0, bytes);
    this.buffer.unmap();
    return out;
  }
  destroy(): void {
    this.gpu.memory.destroy(this.buffer);
  }
}
