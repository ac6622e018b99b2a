/**
 * A/B of kernel profiles end to end: loads one model once, then measures batch-1 decode (or prefill) tok/s
 * under each profile in turn, interleaved (A B C A B C ...) so drift in the GPU's clocks hits all alike.
 *   deno run -A bench/experiments/ab_decode.ts [--synthetic qwen3-4b | --model DIR] [--depth N | --prefill N]
 *     [--chunk N] [--rounds N] [--kv-cache act|q8]
 *     [--configs '[{}, {"decodeAttention":{"fusedRopeMaxKeys":0}}]']
 * A config is a set of kernel profile changes (src/gpu/profile.ts: `matmul`, `decodeAttention`,
 * `prefillAttention`), plus `sched`: scheduler options (`{"sched":{"headStart":false}}`). With --prefill N it
 * measures prefill of an N-token prompt; --chunk sets the prefill chunk (the server's is 512). Prints one
 * line per measurement and the median per config (JSON with --json FILE).
 * @module
 */
import { kvCacheFlag, parseFlags } from "../../src/cli/args.ts";
import { type ProfileOverrides, TUNED } from "../../src/gpu/profile.ts";
import { DEFAULT_MODEL_DIR } from "../../src/platform/deno.ts";
import { loadModel, measureE2E } from "../measure.ts";

const f = parseFlags(
  Deno.args,
  {
    synthetic: "string",
    model: "string",
    depth: "number",
    rounds: "number",
    configs: "string",
    tokens: "number",
    json: "string",
    prefill: "number",
    chunk: "number",
    "kv-cache": "string",
  } as const,
);
type Config = ProfileOverrides & { sched?: { headStart?: boolean } };
const configs: Config[] = JSON.parse(f.configs ?? "[{}]");
const depth = f.depth ?? 0;
const rounds = f.rounds ?? 3;
const spec = f.synthetic ? { synthetic: f.synthetic } : { dir: f.model ?? DEFAULT_MODEL_DIR };
// Scratch is sized at load: for the smallest split and the most K-splits any config asks for.
const t = TUNED;
const sized = {
  keysPerSplit: Math.min(
    t.decodeAttention.keysPerSplit,
    ...configs.map((c) => c.decodeAttention?.keysPerSplit ?? Infinity),
  ),
  splitK: Math.max(t.matmul.tiled.splitK, ...configs.map((c) => c.matmul?.tiled?.splitK ?? 1)),
  splitKMaxRows: Math.max(
    t.matmul.tiled.splitKMaxRows,
    ...configs.map((c) => c.matmul?.tiled?.splitKMaxRows ?? 0),
  ),
};
const { engine } = await loadModel(spec, {
  contextWindow: Math.max(depth, f.prefill ?? 0) + 1024,
  prefillChunk: f.chunk,
  kvCache: kvCacheFlag(f["kv-cache"]),
  profile: {
    decodeAttention: { keysPerSplit: sized.keysPerSplit },
    matmul: { tiled: { splitK: sized.splitK, splitKMaxRows: sized.splitKMaxRows } },
  },
});
/** A config over the measured defaults (the sizing above undone where the config does not set it). */
function profileOf(c: Config): ProfileOverrides {
  const { sched: _s, ...p } = c;
  return {
    ...p,
    decodeAttention: { keysPerSplit: t.decodeAttention.keysPerSplit, ...p.decodeAttention },
    matmul: {
      ...p.matmul,
      tiled: {
        splitK: t.matmul.tiled.splitK,
        splitKMaxRows: t.matmul.tiled.splitKMaxRows,
        ...p.matmul?.tiled,
      },
    },
  };
}
const results: number[][] = configs.map(() => []);
for (let r = 0; r < rounds; r++) {
  for (const [i, c] of configs.entries()) {
    await engine.setKernelProfile(profileOf(c));
    // --prefill N: prefill tok/s of an N-token prompt instead of decode at --depth.
    const e = await measureE2E(engine, {
      headStart: c.sched?.headStart,
      prompts: f.prefill ? [f.prefill] : [],
      depths: f.prefill ? [] : [depth],
      decodeTokens: f.tokens ?? 128,
      runs: 1,
      warmup: 1,
      seed: 1,
    });
    const tps = f.prefill ? e.prefill[0].tps.value : e.decode[0].tps.value;
    results[i].push(tps);
    console.log(`round ${r + 1} ${JSON.stringify(c)}: ${tps.toFixed(1)} tok/s`);
  }
}
const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const summary = configs.map((c, i) => ({ config: c, median: med(results[i]), runs: results[i] }));
for (const s of summary) {
  console.log(`${JSON.stringify(s.config).padEnd(40)} median ${s.median.toFixed(1)} tok/s`);
}
if (f.json) Deno.writeTextFileSync(f.json, JSON.stringify({ depth, summary }, null, 1));
engine.destroy();
