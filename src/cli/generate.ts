/**
 * `npm run generate --`: stream a completion from a model folder.
 *   --model DIR (default: the bundled model)  --prompt TEXT | --prompt-file F  [--chat] [--max-tokens N]
 *   [--temp T] [--top-p P] [--top-k K] [--min-p P] [--seed S] [--stop S] [--json]
 *   [--context-window N] [--prefill-chunk N] [--kv-cache act|q8] [--f32] [--prompt-cache-file FILE]
 * Text goes to stdout as it is generated, a stats line to stderr; --json prints one object instead.
 * With --prompt-cache-file (made by `deno task cache-prompt`) the prompt continues the cached one.
 * @module
 */
import { Engine } from "../engine/engine.ts";
import { Scheduler } from "../engine/scheduler.ts";
import { ValidationError } from "../errors.ts";
import { DEFAULT_MODEL_DIR, DiskModelSource } from "../platform/deno.ts";
import { openPromptCache } from "../platform/prompt_cache_file.ts";
import { kvCacheFlag, parseFlags, runCli, webgpuFlag } from "./args.ts";

const SPEC = {
  model: "string",
  prompt: "string",
  "prompt-file": "string",
  chat: "boolean",
  "max-tokens": "number",
  temp: "number",
  "top-p": "number",
  "top-k": "number",
  "min-p": "number",
  seed: "number",
  stop: "string",
  json: "boolean",
  "context-window": "number",
  "prefill-chunk": "number",
  f32: "boolean",
  webgpu: "string",
  "steps-per-submit": "number",
  "kv-cache": "string",
  "prompt-cache-file": "string",
  help: "boolean",
} as const;

export async function main(argv: string[]): Promise<number> {
  const f = parseFlags(argv, SPEC);
  if (f.help) {
    console.log([
      "usage: npm run generate -- [--model DIR] --prompt TEXT|--prompt-file F [--chat] [--max-tokens N]",
      "       [--temp T] [--top-p P] [--top-k K] [--min-p P] [--seed S] [--stop S] [--json]",
      "       [--context-window N] [--prefill-chunk N] [--steps-per-submit N] [--kv-cache act|q8] [--f32]",
      "       [--prompt-cache-file FILE] [--webgpu deno|dawn|auto]",
      "--prompt-cache-file: a prompt read once by `deno task cache-prompt`; --prompt continues it.",
    ].join("\n"));
    return 0;
  }
  const prompt = await readPrompt(f.prompt, f["prompt-file"]);
  const maxTokens = f["max-tokens"] ?? 256;
  const model = f.model ?? DEFAULT_MODEL_DIR;
  const engine = await Engine.load(new DiskModelSource(model), {
    gpuOptions: { f16: !f.f32, webgpu: webgpuFlag(f.webgpu) },
    maxBatch: 1,
    contextWindow: f["context-window"],
    prefillChunk: f["prefill-chunk"],
    kvCache: kvCacheFlag(f["kv-cache"]),
  });
  const tok = engine.tokenizer;
  if (!tok) throw new ValidationError(`${f.model}: no tokenizer.json, cannot generate text`, "model");
  const text = f.chat ? tok.applyChatTemplate([{ role: "user", content: prompt }]) : prompt;
  let ids = tok.encode(text);
  const cache = f["prompt-cache-file"] === undefined
    ? null
    : await openPromptCache(engine, model, f["prompt-cache-file"]);
  if (cache) ids = [...cache.ids, ...ids];
  const sched = new Scheduler(engine, {
    stepsPerSubmit: f["steps-per-submit"],
    ...(cache ? { prefixFolder: cache.prefixFolder } : {}),
  });
  const gen = sched.submit({
    prompt: ids,
    maxTokens: Math.min(maxTokens, engine.contextWindow - ids.length),
    sampling: {
      temperature: f.temp ?? 0,
      topK: f["top-k"] ?? 0,
      topP: f["top-p"] ?? 1,
      minP: f["min-p"] ?? 0,
      seed: f.seed ?? 0,
    },
    stop: f.stop !== undefined ? [f.stop] : [],
  });
  const enc = new TextEncoder();
  if (!f.json) { for await (const c of gen.chunks()) await Deno.stdout.write(enc.encode(c.text)); }
  const r = await gen.result;
  if (r.error) throw r.error;
  if (f.json) {
    console.log(JSON.stringify({
      model: engine.info.name,
      adapter: engine.gpu.info.adapter,
      webgpu: engine.gpu.info.webgpu,
      token_ids: r.tokenIds,
      text: r.text,
      finish_reason: r.finishReason,
      prompt_tokens: r.promptTokens,
      cached_tokens: r.cachedTokens,
      completion_tokens: r.completionTokens,
      ttft_ms: round(r.ttftMs),
      prefill_tps: round(r.prefillTps),
      decode_tps: round(r.decodeTps),
    }));
  } else {
    console.error(
      `\n[${engine.info.name} on ${engine.gpu.info.adapter}] prompt ${r.promptTokens} tokens, ` +
        `ttft ${round(r.ttftMs)} ms, prefill ${round(r.prefillTps)} tok/s, ` +
        `decode ${round(r.decodeTps)} tok/s (${r.completionTokens} tokens, ${r.finishReason})`,
    );
  }
  await sched.close();
  engine.destroy();
  return 0;
}

/** The text of --prompt or of --prompt-file; exactly one of them. */
export async function readPrompt(text: string | undefined, file: string | undefined): Promise<string> {
  if (file !== undefined) {
    if (text !== undefined) throw new ValidationError("give --prompt or --prompt-file, not both", "prompt");
    try {
      return await Deno.readTextFile(file);
    } catch (e) {
      throw new ValidationError(`--prompt-file ${file}: ${(e as Error).message}`, "prompt-file");
    }
  }
  if (text === undefined) throw new ValidationError("missing --prompt TEXT or --prompt-file F", "prompt");
  return text;
}

function round(x: number): number {
  return Math.round(x * 100) / 100;
}

if (import.meta.main) await runCli(main);
