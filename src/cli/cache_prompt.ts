/**
 * `deno task cache-prompt`: read a long prompt once and save its KV pages, so `deno task generate
 * --prompt-cache-file FILE --prompt TEXT` answers questions about it without reading it again.
 *   --model DIR (default: the bundled model)  --prompt TEXT | --prompt-file F  --out FILE
 *   [--context-window N] [--kv-cache act|q8] [--f32] [--webgpu deno|dawn|auto]
 * @module
 */
import { Engine } from "../engine/engine.ts";
import { ValidationError } from "../errors.ts";
import { DEFAULT_MODEL_DIR, DiskModelSource } from "../platform/deno.ts";
import { savePromptCache } from "../platform/prompt_cache_file.ts";
import { kvCacheFlag, parseFlags, runCli, webgpuFlag } from "./args.ts";
import { readPrompt } from "./generate.ts";

const SPEC = {
  model: "string",
  prompt: "string",
  "prompt-file": "string",
  out: "string",
  "context-window": "number",
  "kv-cache": "string",
  f32: "boolean",
  webgpu: "string",
  help: "boolean",
} as const;

const USAGE = `usage: npm run cache-prompt -- [--model DIR] --prompt TEXT|--prompt-file F --out FILE
       [--context-window N] [--kv-cache act|q8] [--f32] [--webgpu deno|dawn|auto]
Reads the prompt once and writes its KV cache to FILE. Then
  npm run generate -- --model DIR --prompt-cache-file FILE --prompt "a question"
continues after the cached prompt without reading it again (same --kv-cache and --f32; another model or
KV cache format is refused).`;

export async function main(argv: string[]): Promise<number> {
  const f = parseFlags(argv, SPEC);
  if (f.help) {
    console.log(USAGE);
    return 0;
  }
  const prompt = await readPrompt(f.prompt, f["prompt-file"]);
  if (!f.out) throw new ValidationError("missing --out FILE (where the prompt cache goes)", "out");
  const model = f.model ?? DEFAULT_MODEL_DIR;
  const engine = await Engine.load(new DiskModelSource(model), {
    gpuOptions: { f16: !f.f32, webgpu: webgpuFlag(f.webgpu) },
    maxBatch: 1,
    contextWindow: f["context-window"],
    kvCache: kvCacheFlag(f["kv-cache"]),
  });
  try {
    const tok = engine.tokenizer;
    if (!tok) throw new ValidationError(`${model}: no tokenizer.json, cannot read a text prompt`, "model");
    const t0 = performance.now();
    const r = await savePromptCache(engine, model, tok.encode(prompt), f.out);
    console.error(
      `[${engine.info.name}] ${f.out}: ${r.tokens} prompt tokens (${r.cachedTokens} as KV pages, ` +
        `${(r.bytes / 2 ** 20).toFixed(1)} MiB) in ${((performance.now() - t0) / 1000).toFixed(2)} s`,
    );
  } finally {
    engine.destroy();
  }
  return 0;
}

if (import.meta.main) await runCli(main);
