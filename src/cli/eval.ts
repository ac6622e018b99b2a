/**
 * `deno task eval --model DIR --file F`: mean token negative log-likelihood and perplexity of a model on a
 * text file, so quantization settings can be compared for quality, not only speed.
 *   --model DIR (default: the bundled model)  --file F  [--context N (1024)]  [--stride N (context/2)]
 *   [--max-tokens N]  [--prefill-chunk N]  [--f32]  [--int8-x auto|all|none]  [--kv-cache act|q8]  [--json]
 *   [--webgpu deno|dawn|auto]
 * Texts longer than the context are scored with sliding windows (as in the HF perplexity guide): each
 * window is `context` tokens, windows start `stride` apart, and a window scores only the tokens no earlier
 * window scored, so every token but the first is scored once, with at least context − stride tokens before
 * it (all of them in the first window). Logits come from `engine.forwardLogits`; the log-softmax is float64.
 * @module
 */
import { Engine } from "../engine/engine.ts";
import { ValidationError } from "../errors.ts";
import { DEFAULT_MODEL_DIR, DiskModelSource } from "../platform/deno.ts";
import type { ProfileOverrides } from "../gpu/profile.ts";
import { kvCacheFlag, parseFlags, runCli, webgpuFlag } from "./args.ts";

export interface EvalOptions {
  /** Tokens per window (at most the engine's context window). */
  context: number;
  /** Distance between window starts (1 ≤ stride ≤ context). */
  stride: number;
}

export interface EvalResult {
  /** Tokens in the text, tokens scored (all but the first), summed NLL in nats. */
  tokens: number;
  scored: number;
  nll: number;
  meanNll: number;
  perplexity: number;
  windows: number;
  context: number;
  stride: number;
}

/** −log softmax(row)[target], in float64. */
export function tokenNll(row: Float32Array, target: number): number {
  let max = -Infinity;
  for (let i = 0; i < row.length; i++) if (row[i] > max) max = row[i];
  let sum = 0;
  for (let i = 0; i < row.length; i++) sum += Math.exp(row[i] - max);
  return max + Math.log(sum) - row[target];
}

/** Scores `ids` (one document) with sliding windows. */
export async function evaluateIds(engine: Engine, ids: number[], o: EvalOptions): Promise<EvalResult> {
  if (ids.length < 2) throw new ValidationError(`need at least 2 tokens to score, got ${ids.length}`, "file");
  if (!(o.context >= 2 && o.context <= engine.contextWindow)) {
    throw new ValidationError(
      `context ${o.context} must be in [2, ${engine.contextWindow}] (the engine's context window)`,
      "context",
    );
  }
  if (!(o.stride >= 1 && o.stride <= o.context)) {
    throw new ValidationError(`stride ${o.stride} must be in [1, context]`, "stride");
  }
  const V = engine.config.dims.vocab;
  let nll = 0;
  let scored = 0;
  let windows = 0;
  let prevEnd = 0;
  for (let begin = 0; prevEnd < ids.length; begin += o.stride) {
    const end = Math.min(begin + o.context, ids.length);
    const logits = await engine.forwardLogits(ids.slice(begin, end));
    windows++;
    // Row i predicts ids[begin + i + 1]; score targets t in [max(prevEnd, begin + 1), end).
    for (let t = Math.max(prevEnd, begin + 1); t < end; t++) {
      const i = t - begin - 1;
      nll += tokenNll(logits.subarray(i * V, (i + 1) * V), ids[t]);
      scored++;
    }
    prevEnd = end;
  }
  const meanNll = nll / scored;
  return {
    tokens: ids.length,
    scored,
    nll,
    meanNll,
    perplexity: Math.exp(meanNll),
    windows,
    context: o.context,
    stride: o.stride,
  };
}

const SPEC = {
  model: "string",
  file: "string",
  context: "number",
  stride: "number",
  "max-tokens": "number",
  "prefill-chunk": "number",
  f32: "boolean",
  webgpu: "string",
  json: "boolean",
  help: "boolean",
  "int8-x": "string",
  "kv-cache": "string",
} as const;

/**
 * --int8-x: which 4-bit matmuls quantize their input rows to int8 (lib/x8.wgsl), as kernel profile changes.
 * auto: the profile's choice (matrices of ≥ 4M weights where the device has fixed-size subgroups); all: every
 * 4-bit matrix; none: f32 x.
 */
export function int8XProfile(mode: string | undefined): ProfileOverrides {
  if (mode === undefined || mode === "auto") return {};
  if (mode === "all") return { matmul: { int8MinWeights: 0, tiled: { int8: true } } };
  if (mode === "none") return { matmul: { vectorInt8: { enabled: false }, tiled: { int8: false } } };
  throw new ValidationError(`--int8-x ${mode}: expected auto, all or none`, "int8-x");
}

export async function main(argv: string[]): Promise<number> {
  const f = parseFlags(argv, SPEC);
  if (f.help) {
    console.log(
      "usage: deno task eval [--model DIR] --file F [--context N] [--stride N] [--max-tokens N] " +
        "[--int8-x auto|all|none] [--kv-cache act|q8] [--json] [--webgpu deno|dawn|auto]",
    );
    return 0;
  }
  if (!f.file) throw new ValidationError("missing --file F", "file");
  let text: string;
  try {
    text = await Deno.readTextFile(f.file);
  } catch (e) {
    throw new ValidationError(`--file ${f.file}: ${(e as Error).message}`, "file");
  }
  const dir = f.model ?? DEFAULT_MODEL_DIR;
  const context = f.context ?? 1024;
  const stride = f.stride ?? Math.max(1, Math.floor(context / 2));
  const chunk = f["prefill-chunk"] ?? 512;
  const profile = int8XProfile(f["int8-x"]);
  const t0 = performance.now();
  // One sequence; logits for every row of a prefill chunk.
  const engine = await Engine.load(new DiskModelSource(dir), {
    maxBatch: 1,
    contextWindow: context,
    prefillChunk: chunk,
    logitRows: chunk,
    gpuOptions: { f16: !f.f32, profile, webgpu: webgpuFlag(f.webgpu) },
    kvCache: kvCacheFlag(f["kv-cache"]),
  });
  try {
    if (!engine.tokenizer) {
      throw new ValidationError(`${dir}: no tokenizer.json, cannot tokenize the text`, "model");
    }
    let ids = engine.tokenizer.encode(text);
    if (f["max-tokens"] !== undefined) ids = ids.slice(0, f["max-tokens"]);
    // A text shorter than the window is one window: clamp both so the defaults work on any file.
    const ctx = Math.min(context, ids.length);
    const r = await evaluateIds(engine, ids, { context: ctx, stride: Math.min(stride, ctx) });
    const seconds = (performance.now() - t0) / 1000;
    if (f.json) {
      console.log(JSON.stringify({
        model: engine.info.name,
        quantization: engine.info.quantization,
        adapter: engine.gpu.info.adapter,
        file: f.file,
        tokens: r.tokens,
        scored: r.scored,
        mean_nll: r.meanNll,
        perplexity: r.perplexity,
        context: r.context,
        stride: r.stride,
        windows: r.windows,
        f16: engine.gpu.info.f16,
        seconds,
      }));
    } else {
      console.log(
        `${engine.info.name} (${engine.info.quantization}) on ${f.file}: ${r.scored} tokens scored, ` +
          `mean NLL ${r.meanNll.toFixed(4)} nats/token, perplexity ${r.perplexity.toFixed(3)} ` +
          `(context ${r.context}, stride ${r.stride}, ${r.windows} windows, ${seconds.toFixed(1)} s)`,
      );
    }
  } finally {
    engine.destroy();
  }
  return 0;
}

if (import.meta.main) await runCli(main);
