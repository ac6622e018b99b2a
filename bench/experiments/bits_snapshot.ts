/**
 * Bit-identity snapshot of the bundled model: SHA-256 of `Engine.forwardLogits` on a fixed 300-token prompt
 * (128-row prefill chunks, so attention reads earlier chunks' pages) and the greedy ids of a Scheduler run
 * (the same prompt beside a short one, chunked beside decoding, past one decode split), for the f16 and
 * q8 caches, with every 4-bit matmul forced onto int8 x (the int8 GEMM, split-K), on f32 activations and
 * without subgroups. A refactor that must not change numbers leaves this output identical.
 *
 *   deno run -A bench/experiments/bits_snapshot.ts [--only NAME] > before.txt
 */
import { Engine, type EngineOptions } from "../../src/engine/engine.ts";
import { Scheduler } from "../../src/engine/scheduler.ts";
import { DEFAULT_MODEL_DIR, DiskModelSource } from "../../src/platform/deno.ts";

const only = Deno.args[Deno.args.indexOf("--only") + 1] as string | undefined;

/** 300 fixed token ids (an LCG over the vocabulary: no tokenizer or source file involved). */
function promptIds(n: number, vocab: number, seed: number): number[] {
  let s = seed >>> 0;
  return Array.from({ length: n }, () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s % vocab;
  });
}

async function sha(bytes: ArrayBufferView): Promise<string> {
  const d = await crypto.subtle.digest(
    "SHA-256",
    new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength).slice(),
  );
  return [...new Uint8Array(d)].map((b) => b.toString(16).padStart(2, "0")).join("").slice(0, 24);
}

interface Config {
  name: string;
  opts: EngineOptions;
  int8?: boolean;
}

const configs: Config[] = [
  { name: "f16-act", opts: {} },
  { name: "f16-q8", opts: { kvCache: "q8" } },
  { name: "int8-act", opts: {}, int8: true },
  { name: "int8-q8", opts: { kvCache: "q8" }, int8: true },
  { name: "f32-act", opts: { gpuOptions: { f16: false } } },
  { name: "nosub-act", opts: { gpuOptions: { subgroups: false } } },
  { name: "nosub-q8", opts: { gpuOptions: { subgroups: false }, kvCache: "q8" } },
];

for (const c of configs) {
  if (Deno.args.includes("--only") && c.name !== only) continue;
  const profile = c.int8 ? { matmul: { int8MinWeights: 0, tiled: { int8: true } } } : {};
  const engine = await Engine.load(new DiskModelSource(DEFAULT_MODEL_DIR), {
    contextWindow: 512,
    maxBatch: 2,
    logitRows: 128,
    prefillChunk: 64,
    soloPrefillChunk: 128,
    warmup: false,
    ...c.opts,
    gpuOptions: { ...c.opts.gpuOptions, profile },
  });
  try {
    const V = engine.config.dims.vocab;
    const long = promptIds(300, V, 1);
    const short = promptIds(20, V, 2);
    const logits = await engine.forwardLogits(long);
    const s = new Scheduler(engine, { stepsPerSubmit: 4 });
    const [a, b] = await Promise.all(
      [long, short].map((prompt) => s.submit({ prompt, maxTokens: 40 }).result),
    );
    await s.close();
    const solo = new Scheduler(engine, { stepsPerSubmit: 8 });
    const alone = await solo.submit({ prompt: long, maxTokens: 24 }).result;
    await solo.close();
    const errors = engine.gpu.takeErrors();
    console.log(JSON.stringify({
      config: c.name,
      logits: await sha(logits),
      ids: await sha(new Uint32Array([...a.tokenIds, ...b.tokenIds, ...alone.tokenIds])),
      long: a.tokenIds.slice(0, 12),
      short: b.tokenIds.slice(0, 12),
      errors: errors.length,
    }));
  } finally {
    engine.destroy();
  }
}
