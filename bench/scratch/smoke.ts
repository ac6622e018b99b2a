import { Engine } from "../../src/engine/engine.ts";
import { Scheduler } from "../../src/engine/scheduler.ts";
import { SyntheticModelSource } from "../../src/loader/synthetic.ts";
import { DiskModelSource, DEFAULT_MODEL_DIR } from "../../src/platform/deno.ts";
const name = Deno.args[0] ?? "tiny";
const src = new SyntheticModelSource(name, new DiskModelSource(DEFAULT_MODEL_DIR));
let t = performance.now();
const engine = await Engine.load(src, { weightSource: src.weightSource(), maxBatch: 1, contextWindow: 256, warmup: false });
await engine.gpu.device.queue.onSubmittedWorkDone();
console.log("load", performance.now() - t, engine.info, engine.gpu.memory.snapshot());
t = performance.now(); await engine.warmup(); console.log("warmup", performance.now() - t);
const s = new Scheduler(engine);
const r = await s.submit({ prompt: [5, 77, 1000, 3], maxTokens: 8 }).result;
console.log(r.tokenIds, r.finishReason, r.ttftMs, r.decodeTps);
const l = await engine.forwardLogits([5, 77, 1000]);
let mn = Infinity, mx = -Infinity, nan = 0; for (const v of l) { if (!Number.isFinite(v)) nan++; mn = Math.min(mn, v); mx = Math.max(mx, v); }
console.log("logits", mn, mx, nan, engine.gpu.takeErrors());
await s.close(); engine.destroy();
