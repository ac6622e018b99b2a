import { Engine } from "./src/engine/engine.ts";
import { Scheduler } from "./src/engine/scheduler.ts";
import { DiskModelSource, DEFAULT_MODEL_DIR } from "./src/platform/deno.ts";
const pc = Number(Deno.args[0] ?? 512);
const e = await Engine.load(new DiskModelSource(DEFAULT_MODEL_DIR), { maxBatch: 8, contextWindow: 1024, prefillChunk: pc });
const s = new Scheduler(e);
let last = performance.now();
s.listeners.add((ev) => { if (ev.type === "prefill") { const t = performance.now(); console.log(`  prefill ${ev.processed}/${ev.total} +${(t-last).toFixed(0)}ms`); last = t; } });
for (const n of [14, 100, 500]) {
  const ids = Array.from({length: n}, (_, i) => 100 + (i * 7) % 5000);
  const t = performance.now(); last = t;
  const r = await s.submit({ prompt: ids, maxTokens: 4 }).result;
  console.log(`chunk ${pc} len ${n}: ttft ${r.ttftMs.toFixed(0)} ms total ${(performance.now()-t).toFixed(0)}`);
}
await s.close(); e.destroy();
