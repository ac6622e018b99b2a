/**
 * Dawn's JS-thread stalls under Deno (bench/NOTES.md #117) without a GPU: on Dawn's null backend, rounds of
 * 16-byte readbacks (copy, submit, mapAsync, unmap) with `--live` command encoders held (and, with --hold,
 * every readback's encoder and command buffer, so the live set grows), and a 1 ms interval
 * whose worst gap shows the thread stopping. Readbacks there take microseconds; a stall shows as a trip of
 * hundreds of ms, while `perf` finds the main thread busy in Deno's own code. Each readback here needs one
 * dawn.node event poll, which src/platform/dawn.ts's pacing leaves alone (it spaces only long chains of
 * polls, bench/NOTES.md #121), so these stalls remain; `--gc N` forces a collection every N trips.
 *   deno [--v8-flags=--expose-gc] run -A bench/experiments/dawn_stall.ts [--live 20000] [--hold] [--rounds 10]
 *     [--trips 2000] [--gc N [--minor]]
 * @module
 */
import { parseFlags } from "../../src/cli/args.ts";
import { dawnGpu } from "../../src/platform/dawn.ts";

const f = parseFlags(Deno.args, {
  live: "number",
  hold: "boolean",
  rounds: "number",
  trips: "number",
  gc: "number",
  minor: "boolean",
});
const gc = (globalThis as { gc?: (o?: { type: string }) => void }).gc;
if (f.gc && !gc) throw new Error("--gc needs deno run --v8-flags=--expose-gc");
const gpu = await dawnGpu(["backend=null"]);
const dev = await (await gpu.requestAdapter())!.requestDevice();
const held: unknown[] = Array.from({ length: f.live ?? 20000 }, () => dev.createCommandEncoder());
const rb = dev.createBuffer({ size: 16, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
const src = dev.createBuffer({ size: 1 << 20, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC });
let gap = 0;
let last = performance.now();
const tick = setInterval(() => {
  const now = performance.now();
  gap = Math.max(gap, now - last);
  last = now;
}, 1);
for (let round = 0; round < (f.rounds ?? 10); round++) {
  gap = 0;
  let worst = 0;
  const t0 = performance.now();
  for (let i = 0; i < (f.trips ?? 2000); i++) {
    const t = performance.now();
    const e = dev.createCommandEncoder();
    e.copyBufferToBuffer(src, 0, rb, 0, 16);
    const cb = e.finish();
    if (f.hold) held.push(e, cb);
    dev.queue.submit([cb]);
    await rb.mapAsync(GPUMapMode.READ);
    rb.unmap();
    if (f.gc && i % f.gc === f.gc - 1) gc!(f.minor ? { type: "minor" } : undefined);
    worst = Math.max(worst, performance.now() - t);
  }
  console.log(
    `round ${round}: ${(performance.now() - t0).toFixed(0)} ms, worst readback ${worst.toFixed(1)} ms, ` +
      `worst event-loop gap ${gap.toFixed(1)} ms (${held.length} objects held)`,
  );
}
clearInterval(tick);
Deno.exit(0);
