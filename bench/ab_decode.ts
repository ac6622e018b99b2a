/**
 * A/B of decode-kernel shapes end to end: loads one model once, then measures batch-1 decode tok/s under
 * each matmul tuning in turn, interleaved (A B C A B C ...) so drift in the GPU's clocks hits all alike.
 *   deno run -A bench/ab_decode.ts [--synthetic qwen3-4b | --model DIR] [--depth N | --prefill N] [--chunk N] [--rounds N]
 *     [--kv-cache act|q8] [--configs '[{"U":4,"V":2,"PF":1},{"U":8,"V":2,"PF":2},{"attn":{"ropeMaxKv":0}}]']
 * A config is a partial vector-matmul tuning (src/ops/matmul.ts), plus `attn`: a partial decode-attention
 * tuning (src/ops/attention.ts; `ropeMaxKv: 0` takes RoPE out of decode attention again), and `x8`: the
 * int8-x matmul tuning (`{"x8":{"on":false}}` is the f32-x kernel), and `tiled`: the prefill matmul tuning
 * (`{"tiled":{"x8":true}}`: matmul_tiled_x8.wgsl), `pattn`: the prefill-attention tuning, and `sched`: scheduler
 * options (`{"sched":{"headStart":false}}`). With --prefill N
 * it measures prefill of an N-token prompt; --chunk sets the prefill chunk (the server's is 512).
 * Prints one line per measurement and the median per config (JSON with --json FILE).
 * @module
 */
import { kvCacheFlag, parseFlags } from "../src/cli/args.ts";
import { type MatmulTuning, setMatmulTuning } from "../src/ops/matmul.ts";
import { setDecodeAttentionTuning, setPrefillAttentionTuning } from "../src/ops/attention.ts";
import { DEFAULT_MODEL_DIR } from "../src/platform/deno.ts";
import { loadModel, measureE2E } from "./measure.ts";

const f = parseFlags(Deno.args, {
  synthetic: "string", model: "string", depth: "number", rounds: "number", configs: "string", tokens: "number", json: "string",
  prefill: "number", chunk: "number", "kv-cache": "string",
} as const);
type Config = Partial<MatmulTuning["vec"]> & {
  attn?: Parameters<typeof setDecodeAttentionTuning>[0];
  pattn?: Parameters<typeof setPrefillAttentionTuning>[0];
  x8?: Partial<MatmulTuning["x8"]>;
  tiled?: Partial<MatmulTuning["tiled"]>;
  /** Scheduler options (`{"sched":{"headStart":false}}`). */
  sched?: { headStart?: boolean };
};
const configs: Config[] = JSON.parse(f.configs ?? '[{"U":4,"V":2,"PF":1},{"U":8,"V":2,"PF":1},{"U":8,"V":2,"PF":2}]');
const depth = f.depth ?? 0;
const rounds = f.rounds ?? 3;
const spec = f.synthetic ? { synthetic: f.synthetic } : { dir: f.model ?? DEFAULT_MODEL_DIR };
// Split scratch is sized at load: size it for the smallest split any config asks for.
const baseAttn = setDecodeAttentionTuning({});
setDecodeAttentionTuning({ split: Math.min(baseAttn.split, ...configs.map((c) => c.attn?.split ?? Infinity)) });
// Split-K scratch likewise: sized for the most splits any config asks for.
const baseMm = setMatmulTuning({});
setMatmulTuning({
  tiled: {
    splitK: Math.max(baseMm.tiled.splitK, ...configs.map((c) => c.tiled?.splitK ?? 1)),
    splitKMaxRows: Math.max(baseMm.tiled.splitKMaxRows, ...configs.map((c) => c.tiled?.splitKMaxRows ?? 0)),
  },
});
const { engine } = await loadModel(spec, { contextWindow: Math.max(depth, f.prefill ?? 0) + 1024, prefillChunk: f.chunk, kvCache: kvCacheFlag(f["kv-cache"]) });
setDecodeAttentionTuning(baseAttn);
setMatmulTuning(baseMm);
const basePattn = setPrefillAttentionTuning({});
const results: number[][] = configs.map(() => []);
for (let r = 0; r < rounds; r++) {
  for (const [i, c] of configs.entries()) {
    const { attn, pattn, x8, tiled, sched, ...vec } = c;
    setMatmulTuning({ vec: { ...baseMm.vec, ...vec }, x8: { ...baseMm.x8, ...x8 }, tiled: { ...baseMm.tiled, ...tiled } });
    setDecodeAttentionTuning({ ...baseAttn, ...attn });
    setPrefillAttentionTuning({ ...basePattn, ...pattn });
    await engine.dropPlans();
    // --prefill N: prefill tok/s of an N-token prompt instead of decode at --depth.
    const e = await measureE2E(engine, {
      headStart: sched?.headStart, prompts: f.prefill ? [f.prefill] : [], depths: f.prefill ? [] : [depth], decodeTokens: f.tokens ?? 128, runs: 1, warmup: 1, seed: 1,
    });
    const tps = f.prefill ? e.prefill[0].tps.value : e.decode[0].tps.value;
    results[i].push(tps);
    console.log(`round ${r + 1} ${JSON.stringify(c)}: ${tps.toFixed(1)} tok/s`);
  }
}
const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const summary = configs.map((c, i) => ({ config: c, median: med(results[i]), runs: results[i] }));
for (const s of summary) console.log(`${JSON.stringify(s.config).padEnd(40)} median ${s.median.toFixed(1)} tok/s`);
if (f.json) Deno.writeTextFileSync(f.json, JSON.stringify({ depth, summary }, null, 1));
engine.destroy();
