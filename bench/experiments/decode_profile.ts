/**
 * Where a decode step's time goes: the step's recorded dispatches (one decode row at a given depth) timed
 * whole, then each kernel variant's first dispatch alone (repeated in one pass), times its count. The gap
 * between the whole step and the sum of its parts is what the dispatches cost beyond their own work (launch,
 * barriers).
 *
 *   deno run -A bench/experiments/decode_profile.ts --synthetic qwen3-30b-a3b [--depth 0] [--top 12]
 *     [--webgpu deno|dawn]
 * @module
 */
import { parseFlags, webgpuFlag } from "../../src/cli/args.ts";
import { Engine } from "../../src/engine/engine.ts";
import { SyntheticModelSource } from "../../src/loader/synthetic.ts";
import { DiskModelSource } from "../../src/platform/deno.ts";
import { GpuTimer } from "../timer.ts";

const flags = parseFlags(Deno.args, {
  synthetic: "string",
  depth: "number",
  top: "number",
  profile: "string",
  webgpu: "string",
});
const t0 = performance.now();
const note = (s: string) =>
  console.error(`[profile] ${((performance.now() - t0) / 1000).toFixed(1)} s: ${s}`);
const shape = String(flags.synthetic ?? "qwen3-4b");
const depth = Number(flags.depth ?? 0);
const base = new DiskModelSource(new URL("../../models/flint-coder-19m-mlx-4bit", import.meta.url).pathname);
const src = new SyntheticModelSource(shape, base);
const engine = await Engine.load(src, {
  weightSource: src.weightSource({ seed: 1 }),
  maxBatch: 1,
  contextWindow: Math.max(4096, depth + 64),
  gpuOptions: {
    ...(flags.profile ? { profile: JSON.parse(flags.profile) } : {}),
    webgpu: webgpuFlag(flags.webgpu),
  },
});
note("loaded");
const plan = await engine.plan({ decode: 1, segments: [], logits: "sampled" });
note(`plan of ${plan.list.length} dispatches`);
const slot = engine.slots.acquire()!;
const pages: number[] = [];
engine.kv.ensure(slot, pages, depth + 1);
engine.slots.start(slot, [1], depth + 2, { temperature: 0, topK: 0, topP: 1, minP: 0, seed: 0 });
engine.writeRows(new Uint32Array([1, depth, slot, 1]));
const step = { maxKvLen: depth + 1, minKvLen: depth + 1 };
const timer = new GpuTimer(engine.gpu, { targetMs: 50 });
const whole = await timer.time(plan.list, step);
note(`whole step ${(whole.ms * 1000).toFixed(0)} µs`);
const by = new Map<string, { us: number; n: number }>();
// Each kernel variant timed once alone (its first dispatch), counted as often as the step runs it.
for (const d of plan.list) {
  const e = by.get(d.kernel.label);
  if (e) e.n++;
  else by.set(d.kernel.label, { us: (await timer.time([d], step)).ms * 1000, n: 1 });
}
let sum = 0;
for (const e of by.values()) sum += e.us * e.n;
console.log(
  `${shape}, depth ${depth}: ${plan.list.length} dispatches; step ${(whole.ms * 1000).toFixed(0)} µs ` +
    `(${(1 / whole.ms * 1000).toFixed(0)} tok/s), dispatches alone sum to ${sum.toFixed(0)} µs`,
);
const rows = [...by].sort((a, b) => b[1].us * b[1].n - a[1].us * a[1].n).slice(0, Number(flags.top ?? 14));
for (const [k, e] of rows) {
  const all = (e.us * e.n).toFixed(0).padStart(7);
  console.log(`${all} µs  ${String(e.n).padStart(4)}×  ${e.us.toFixed(1).padStart(6)} µs each  ${k}`);
}
Deno.exit(0);
