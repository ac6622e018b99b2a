/**
 * Deno's WebGPU against Dawn's (dawn.node) on what the engine waits for: the round trip of a 16-byte
 * readback (submit a copy, mapAsync, unmap) and submit-to-done of a fixed GPU job (a 1 GiB buffer copy),
 * each repeated, as percentiles. Run-to-run spread on Dawn shows here if it is in the waits.
 *   deno run -A bench/experiments/dawn_latency.ts [--iters 200]
 * @module
 */
import { parseFlags } from "../../src/cli/args.ts";
import { Gpu } from "../../src/gpu/device.ts";

const f = parseFlags(Deno.args, { iters: "number" });
const iters = f.iters ?? 200;
const pct = (v: number[], p: number) =>
  [...v].sort((a, b) => a - b)[Math.min(v.length - 1, Math.floor(p * v.length))];
const show = (v: number[]) =>
  `p10 ${pct(v, 0.1).toFixed(3)}  p50 ${pct(v, 0.5).toFixed(3)}  p90 ${pct(v, 0.9).toFixed(3)}  max ${
    Math.max(...v).toFixed(3)
  } ms`;
for (const webgpu of ["deno", "dawn"] as const) {
  const gpu = await Gpu.create({ webgpu });
  const dev = gpu.device;
  const U = GPUBufferUsage;
  const src = dev.createBuffer({ size: 1 << 30, usage: U.STORAGE | U.COPY_SRC | U.COPY_DST });
  const dst = dev.createBuffer({ size: 1 << 30, usage: U.STORAGE | U.COPY_SRC | U.COPY_DST });
  const rb = dev.createBuffer({ size: 16, usage: U.MAP_READ | U.COPY_DST });
  const trip: number[] = [];
  const job: number[] = [];
  for (let i = 0; i < iters; i++) {
    let t = performance.now();
    let e = dev.createCommandEncoder();
    e.copyBufferToBuffer(src, 0, rb, 0, 16);
    dev.queue.submit([e.finish()]);
    await rb.mapAsync(GPUMapMode.READ);
    rb.unmap();
    trip.push(performance.now() - t);
    if (i % 4 === 0) {
      t = performance.now();
      e = dev.createCommandEncoder();
      e.copyBufferToBuffer(src, 0, dst, 0, 1 << 30);
      e.copyBufferToBuffer(dst, 0, rb, 0, 16);
      dev.queue.submit([e.finish()]);
      await rb.mapAsync(GPUMapMode.READ);
      rb.unmap();
      job.push(performance.now() - t);
    }
  }
  console.log(`${webgpu} (${gpu.info.adapter}): readback round trip ${show(trip)}`);
  console.log(`${webgpu}: 1 GiB copy + readback ${show(job)}`);
  src.destroy();
  dst.destroy();
  gpu.destroy();
}
Deno.exit(0);
