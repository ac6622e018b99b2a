/**
 * The engine's output with prefill attention on FMA units against matrix units (profile
 * `prefillAttention.matrixUnits` false, then true): one synthetic model loaded once per setting on Dawn, the
 * same pseudo-random token ids scored by `forwardLogits` (every row's logits, chunks at growing depth), then
 * each setting's mean NLL of the next id, the share of rows whose argmax agrees, and the largest |Δ logit|
 * against the largest |logit|; then matrix units again with prefill chunks of `--chunk` rows (chunks that
 * straddle the kernel's 16-row slabs and 64-key tiles), whose logits must equal the default chunks' bit for
 * bit. The kernel-level check against float64 is the lab's (`deno task kernel
 * wgsl/attention_prefill_sgmat.wgsl`); this one shows the whole model agrees.
 *   deno run -A bench/experiments/attention_ab.ts [--synthetic qwen3-4b] [--tokens 3000] [--chunk 48]
 *     [--webgpu dawn]
 * @module
 */
import { parseFlags, webgpuFlag } from "../../src/cli/args.ts";
import { loadModel } from "../measure.ts";

const f = parseFlags(
  Deno.args,
  { synthetic: "string", tokens: "number", chunk: "number", webgpu: "string" } as const,
);
const n = f.tokens ?? 3000;
const spec = { synthetic: f.synthetic ?? "qwen3-4b" };
let seed = 12345;
const next = () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0);

interface Scored {
  nll: number;
  argmax: Int32Array;
  last: Float32Array;
  ms: number;
  all: Float32Array | null;
}
const runs: Scored[] = [];
let ids: number[] = [];
for (const [matrixUnits, chunk] of [[false, 0], [true, 0], [true, f.chunk ?? 48]] as const) {
  const { engine } = await loadModel(spec, {
    contextWindow: n + 16,
    // forwardLogits scores min(solo chunk, logit rows) rows a step: 2,048 by default, else the chunk.
    ...(chunk ? { prefillChunk: chunk, logitRows: chunk } : { logitRows: 2048 }),
    webgpu: webgpuFlag(f.webgpu ?? "dawn"),
    profile: { prefillAttention: { matrixUnits } },
  });
  const V = engine.config.dims.vocab;
  if (!ids.length) ids = Array.from({ length: n }, () => next() % V);
  const t0 = performance.now();
  const logits = await engine.forwardLogits(ids);
  const ms = performance.now() - t0;
  let nll = 0;
  const argmax = new Int32Array(n);
  for (let r = 0; r < n; r++) {
    const row = logits.subarray(r * V, (r + 1) * V);
    let mx = -Infinity, at = 0;
    for (let i = 0; i < V; i++) if (row[i] > mx) [mx, at] = [row[i], i];
    argmax[r] = at;
    if (r + 1 < n) {
      let sum = 0;
      for (let i = 0; i < V; i++) sum += Math.exp(row[i] - mx);
      nll += mx + Math.log(sum) - row[ids[r + 1]];
    }
  }
  // The last 64 rows (the deepest) kept for the logit comparison.
  runs.push({
    nll: nll / (n - 1),
    argmax,
    last: logits.slice((n - 64) * V),
    ms,
    all: matrixUnits ? logits : null,
  });
  console.log(
    `matrixUnits ${matrixUnits}${chunk ? `, ${chunk}-row chunks` : ""}: mean NLL ${
      (nll / (n - 1)).toFixed(6)
    } over ${n - 1} ids, ` +
      `forwardLogits in ${Math.min(engine.soloPrefillChunk, engine.acts.cap.logitRows)}-row steps ` +
      `${ms.toFixed(0)} ms (wall, ${engine.gpu.info.webgpu})`,
  );
  engine.destroy();
}
const [a, b, c] = runs;
const differ = c.all!.findIndex((v, i) => !Object.is(v, b.all![i]));
console.log(
  `${f.chunk ?? 48}-row chunks against the default: ${
    differ < 0 ? "bit-identical logits" : `logit ${differ} differs`
  }`,
);
let agree = 0;
for (let r = 0; r < n; r++) if (a.argmax[r] === b.argmax[r]) agree++;
let dmax = 0, lmax = 0;
for (let i = 0; i < a.last.length; i++) {
  dmax = Math.max(dmax, Math.abs(a.last[i] - b.last[i]));
  lmax = Math.max(lmax, Math.abs(a.last[i]));
}
console.log(
  `|Δ mean NLL| ${Math.abs(a.nll - b.nll).toExponential(2)}; argmax agrees on ${agree}/${n} rows; ` +
    `last 64 rows: max |Δ logit| ${dmax.toExponential(2)} (max |logit| ${lmax.toFixed(2)})`,
);
Deno.exit(0);
