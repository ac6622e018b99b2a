/**
 * Where Dawn's run-to-run spread goes (bench/NOTES.md #112): the bench's end-to-end path (one prompt, then
 * decode) repeated in one process, each run split into wall time inside `queue.submit`, time awaiting
 * `mapAsync` / `onSubmittedWorkDone`, the longest event-loop stall (a 1 ms interval's worst gap), and the
 * rest (JS encoding); then the slowest synchronous WebGPU calls (every method of the device, queue and
 * buffer prototypes, timed) and how many event polls dawn.node made (FLINT_DAWN_POLLING=spin: unpaced).
 * Run it in several processes per implementation to see whether the spread lives within a process or
 * between them.
 *   deno run -A bench/experiments/dawn_spread.ts --webgpu dawn [--synthetic qwen3-4b | --model DIR]
 *     [--runs 4] [--null] (Dawn's null backend: no GPU work, the stalls alone)
 * @module
 */
import { parseFlags, webgpuFlag } from "../../src/cli/args.ts";
import { isNativeFunction } from "../../src/platform/dawn.ts";
import { DEFAULT_MODEL_DIR } from "../../src/platform/deno.ts";
import { loadModel, measureE2E } from "../measure.ts";

const f = parseFlags(Deno.args, {
  webgpu: "string",
  synthetic: "string",
  runs: "number",
  prompt: "number",
  tokens: "number",
  model: "string",
  null: "boolean",
});
const webgpu = webgpuFlag(f.webgpu);
const t0 = performance.now();
const spec = f.model ? { dir: f.model === "default" ? DEFAULT_MODEL_DIR : f.model } : {
  synthetic: f.synthetic ?? "qwen3-4b",
};
const { engine, loadMs, compileMs } = await loadModel(spec, {
  // Each run's scheduler keeps its prompt in its own prefix cache: room for every run's.
  contextWindow: ((f.runs ?? 4) + 1) * ((f.prompt ?? 512) + (f.tokens ?? 64) + 64),
  webgpu,
  ...(f.null ? { dawnFlags: ["backend=null"] } : {}),
});
const dev = engine.gpu.device;
const clock = { submit: 0, submits: 0, wait: 0, waits: 0 };
// Patched on the prototypes: Dawn's wrappers may be new objects on every property read.
const queueProto = Object.getPrototypeOf(dev.queue);
const submit = queueProto.submit;
queueProto.submit = function (this: GPUQueue, cbs: GPUCommandBuffer[]) {
  const t = performance.now();
  submit.call(this, cbs);
  clock.submit += performance.now() - t;
  clock.submits++;
};
const done = queueProto.onSubmittedWorkDone;
queueProto.onSubmittedWorkDone = async function (this: GPUQueue) {
  const t = performance.now();
  await done.call(this);
  clock.wait += performance.now() - t;
  clock.waits++;
};
const probe = dev.createBuffer({ size: 16, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
const bufferProto = Object.getPrototypeOf(probe);
const mapAsync = bufferProto.mapAsync;
bufferProto.mapAsync = async function (this: GPUBuffer, ...a: unknown[]) {
  const t = performance.now();
  await mapAsync.apply(this, a);
  clock.wait += performance.now() - t;
  clock.waits++;
};
// Every method of these prototypes timed: the longest single call and the total, per name.
const calls = new Map<string, { max: number; total: number; n: number }>();
const timeAll = (proto: Record<string, unknown>, label: string) => {
  for (const name of Object.getOwnPropertyNames(proto)) {
    const d = Object.getOwnPropertyDescriptor(proto, name);
    if (!d || typeof d.value !== "function" || name === "constructor") continue;
    const fn = d.value as (...a: unknown[]) => unknown;
    proto[name] = function (this: unknown, ...a: unknown[]) {
      const t = performance.now();
      const r = fn.apply(this, a);
      const ms = performance.now() - t;
      const c = calls.get(`${label}.${name}`) ?? { max: 0, total: 0, n: 0 };
      c.max = Math.max(c.max, ms);
      c.total += ms;
      c.n++;
      calls.set(`${label}.${name}`, c);
      return r;
    };
  }
};
timeAll(Object.getPrototypeOf(dev), "device");
const encoder = dev.createCommandEncoder();
timeAll(Object.getPrototypeOf(encoder), "encoder");
const pass = encoder.beginComputePass();
timeAll(Object.getPrototypeOf(pass), "pass");
pass.end();
encoder.finish();
// dawn.node looks setImmediate up on every poll, so a wrapper sees each poll (native callbacks; passed on
// unchanged: src/platform/dawn.ts paces them by that).
const immediate = globalThis.setImmediate;
let polls = 0;
(globalThis as { setImmediate: unknown }).setImmediate = (cb: (...a: unknown[]) => void, ...a: unknown[]) => {
  if (isNativeFunction(cb)) polls++;
  return immediate(cb, ...a);
};
let stall = 0;
let last = performance.now();
const tick = setInterval(() => {
  const now = performance.now();
  stall = Math.max(stall, now - last);
  last = now;
}, 1);
console.log(
  `${engine.gpu.info.webgpu} on ${engine.gpu.info.adapter}: load ${loadMs.toFixed(0)} ms, ` +
    `compile ${compileMs.toFixed(0)} ms`,
);
for (let run = 0; run < (f.runs ?? 4); run++) {
  Object.assign(clock, { submit: 0, submits: 0, wait: 0, waits: 0 });
  calls.clear();
  polls = 0;
  stall = 0;
  last = performance.now();
  const t = performance.now();
  const r = await measureE2E(engine, {
    prompts: [f.prompt ?? 512],
    depths: [f.prompt ?? 512],
    decodeTokens: f.tokens ?? 64,
    runs: 1,
    warmup: run === 0 ? 1 : 0,
    seed: run + 1,
  });
  const wall = performance.now() - t;
  console.log(
    `run ${run + 1}: prefill ${r.prefill[0].tps.value.toFixed(0)} tok/s, decode ` +
      `${r.decode[0].tps.value.toFixed(0)} tok/s | wall ${wall.toFixed(0)} ms: submit ` +
      `${clock.submit.toFixed(1)} ms (${clock.submits}×), waits ${
        clock.wait.toFixed(1)
      } ms (${clock.waits}×), ` +
      `rest ${(wall - clock.submit - clock.wait).toFixed(1)} ms, worst loop stall ${stall.toFixed(1)} ms`,
  );
  const slow = [...calls].sort((x, y) => y[1].max - x[1].max).slice(0, 4);
  console.log(
    `  slowest calls: ${
      slow.map(([k, c]) => `${k} max ${c.max.toFixed(1)} (${c.n}×, ${c.total.toFixed(1)})`)
        .join("; ")
    }; ${polls} event polls`,
  );
}
clearInterval(tick);
console.log(`total ${((performance.now() - t0) / 1000).toFixed(1)} s`);
Deno.exit(0);
