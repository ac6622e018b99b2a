import { Engine } from "./src/engine/engine.ts";
import { Scheduler } from "./src/engine/scheduler.ts";
import { GREEDY } from "./src/engine/slots.ts";
import { DiskModelSource, DEFAULT_MODEL_DIR } from "./src/platform/deno.ts";
const e = await Engine.load(new DiskModelSource(DEFAULT_MODEL_DIR), { maxBatch: 2, contextWindow: 256 });
const tok = e.tokenizer!;
const prompt = tok.encode(tok.applyChatTemplate([{ role: "user", content: "Write a python class for a bank account." }]));
const s = new Scheduler(e);
for (const [f, p] of [[0, 0], [0.0001, 0], [1.2, 0.6]]) {
  const r = await s.submit({ prompt, maxTokens: 24, sampling: { ...GREEDY, frequencyPenalty: f, presencePenalty: p } }).result;
  console.log(f, p, r.finishReason, r.completionTokens, JSON.stringify(r.text), r.error?.message);
}
console.log(e.gpu.takeErrors());
await s.close(); e.destroy();
