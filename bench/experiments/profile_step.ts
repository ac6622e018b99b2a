/**
 * Per-kernel GPU time of one engine step, from timestamp queries (each dispatch in its own pass, so
 * absolute totals include pass overhead; the split between kernels is what this is for), plus the
 * steady-state time per step with K steps per submit and the CPU encode cost.
 *   deno run -A bench/experiments/profile_step.ts [--model DIR | --synthetic NAME] [--decode N] [--prefill N]
 *     [--depth D] [--steps K] [--webgpu deno|dawn]
 * @module
 */
import { DEFAULT_MODEL_DIR } from "../../src/platform/deno.ts";
import { parseFlags, webgpuFlag } from "../../src/cli/args.ts";
import { readBuffer } from "../../src/gpu/readback.ts";
import { loadModel } from "../measure.ts";

const f = parseFlags(Deno.args, {
  model: "string",
  synthetic: "string",
  decode: "number",
  prefill: "number",
  depth: "number",
  steps: "number",
  webgpu: "string",
});
const { engine } = await loadModel(
  f.synthetic ? { synthetic: f.synthetic } : { dir: f.model ?? DEFAULT_MODEL_DIR },
  {
    maxBatch: Math.max(1, f.decode ?? 1),
    contextWindow: (f.depth ?? 0) + (f.prefill ?? 0) + 10 * (f.steps ?? 32) + 64,
    prefillChunk: Math.max(512, f.prefill ?? 0),
    webgpu: f.webgpu === undefined ? undefined : webgpuFlag(f.webgpu),
  },
);
const gpu = engine.gpu, dev = gpu.device;
const D = f.decode ?? (f.prefill ? 0 : 1), P = f.prefill ?? 0, depth = f.depth ?? 0, K = f.steps ?? 32;
const layout = {
  decode: D,
  segments: P ? [{ row0: D, len: P, final: true }] : [],
  logits: "sampled" as const,
};
const plan = await engine.plan(layout);
// Fake sequences: slots with `depth` tokens of history and pages for depth + K + P.
const rows: number[] = [];
for (let i = 0; i < D; i++) {
  const slot = engine.slots.acquire()!;
  engine.slots.start(slot, Array.from({ length: depth + 1 }, (_, j) => 1 + (j % 1000)), depth + 10 * K + 10, {
    temperature: 0,
    topK: 0,
    topP: 1,
    minP: 0,
    seed: 0,
  });
  dev.queue.writeBuffer(engine.slots.slots, slot * 16, new Uint32Array([depth, depth + 10 * K + 10, 0, 0]));
  engine.kv.ensure(slot, [], depth + 10 * K + 10);
  rows.push(0, 0, slot, 1);
}
if (P) {
  const slot = engine.slots.acquire()!;
  engine.slots.start(slot, Array.from({ length: depth + P }, (_, j) => 1 + (j % 1000)), depth + P + 5, {
    temperature: 0,
    topK: 0,
    topP: 1,
    minP: 0,
    seed: 0,
  });
  engine.kv.ensure(slot, [], depth + P + 5);
  for (let i = 0; i < P; i++) rows.push(1 + i, depth + i, slot, 0);
}
engine.writeRows(new Uint32Array(rows));
const maxKv = depth + P + 1;
const sync = async () => {
  await readBuffer(gpu, engine.slots.slots, 0, 16);
};

// Steady state: K steps in one submit.
for (let w = 0; w < 2; w++) {
  const enc = dev.createCommandEncoder();
  for (let i = 0; i < K; i++) engine.encodeStep(enc, plan, maxKv);
  dev.queue.submit([enc.finish()]);
  await sync();
}
const tE0 = performance.now();
const enc = dev.createCommandEncoder();
for (let i = 0; i < K; i++) engine.encodeStep(enc, plan, maxKv);
const cb = enc.finish();
const tE1 = performance.now();
dev.queue.submit([cb]);
await sync();
const tE2 = performance.now();
const one = performance.now();
{
  const e = dev.createCommandEncoder();
  engine.encodeStep(e, plan, maxKv);
  dev.queue.submit([e.finish()]);
  await sync();
}
const oneT = performance.now() - one;
console.log(
  `layout ${JSON.stringify(layout)} depth ${depth}: ${plan.list.length} dispatches/step; encode ${
    ((tE1 - tE0) / K * 1000).toFixed(0)
  } us/step; GPU+sync ${((tE2 - tE1 - oneT) / (K - 1)).toFixed(3)} ms/step (K=${K})`,
);

if (gpu.info.timestamps) {
  const n = plan.list.length;
  const qs = dev.createQuerySet({ type: "timestamp", count: 2 * n });
  const res = dev.createBuffer({
    size: 16 * n,
    usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC,
  });
  const e = dev.createCommandEncoder();
  plan.list.forEach((d, i) => {
    const pass = e.beginComputePass({
      timestampWrites: { querySet: qs, beginningOfPassWriteIndex: 2 * i, endOfPassWriteIndex: 2 * i + 1 },
    });
    const g = typeof d.grid === "function" ? d.grid({ maxKvLen: maxKv }) : d.grid;
    pass.setPipeline(d.kernel.pipeline);
    pass.setBindGroup(0, d.bindGroup);
    if (g[0] && g[1] && g[2]) pass.dispatchWorkgroups(...g);
    pass.end();
  });
  e.resolveQuerySet(qs, 0, 2 * n, res, 0);
  dev.queue.submit([e.finish()]);
  const t = new BigUint64Array(await readBuffer(gpu, res, 0, 16 * n));
  const by = new Map<string, { us: number; count: number }>();
  let total = 0;
  plan.list.forEach((d, i) => {
    const us = Number(t[2 * i + 1] - t[2 * i]) / 1000;
    total += us;
    const k = d.kernel.label.replace(/_F16|_SUBGROUPS/g, "");
    const o = by.get(k) ?? { us: 0, count: 0 };
    o.us += us;
    o.count++;
    by.set(k, o);
  });
  console.log(`sum of kernel times ${(total / 1000).toFixed(3)} ms`);
  for (const [k, v] of [...by.entries()].sort((a, b) => b[1].us - a[1].us)) {
    console.log(`  ${(v.us / 1000).toFixed(3).padStart(7)} ms ${String(v.count).padStart(4)}x  ${k}`);
  }
}
Deno.exit(0);
