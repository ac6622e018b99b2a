/**
 * Prompt-cache files through the real CLIs: `cache-prompt` reads a document once, `generate
 * --prompt-cache-file` continues it from the file with the same greedy ids as reading it all, and a file
 * made for another KV format or a file that is not a prompt cache is refused with a message naming it.
 * Models with per-sequence state (Qwen3-Next, LFM2: recurrent layers; Gemma 3: KV rings; fixtures without
 * a tokenizer, so through the CLIs' functions) cache up to their state snapshot and resume from it.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { Engine } from "../../src/engine/engine.ts";
import type { SchedulerOptions } from "../../src/engine/generation.ts";
import { Scheduler } from "../../src/engine/scheduler.ts";
import { Gpu } from "../../src/gpu/device.ts";
import { ValidationError } from "../../src/errors.ts";
import { deltaChunkLen } from "../../src/ops/recurrent.ts";
import { DiskModelSource } from "../../src/platform/deno.ts";
import { openPromptCache, savePromptCache } from "../../src/platform/prompt_cache_file.ts";
import { DEFAULT_MODEL, FIXTURES, readGolden, ROOT } from "../util/fixtures.ts";

let dir: string;
const DOC = Array.from(
  { length: 40 },
  (_, i) => `def step_${i}(x):\n    return x * ${i + 3} + ${(i * 7) % 11}  # stage ${i}\n`,
).join("");
const QUESTION = "def final(x):\n    return";

async function cli(script: string, args: string[]) {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", `${ROOT}src/cli/${script}`, ...args],
    env: { XDG_RUNTIME_DIR: "/tmp" },
  }).output();
  return {
    code: out.code,
    stdout: new TextDecoder().decode(out.stdout),
    stderr: new TextDecoder().decode(out.stderr),
  };
}

beforeAll(async () => {
  dir = await Deno.makeTempDir({ prefix: "flint_prompt_cache_" });
  await Deno.writeTextFile(`${dir}/doc.txt`, DOC);
  await Deno.writeTextFile(`${dir}/whole.txt`, DOC + QUESTION);
});
let gpu: Gpu | null = null;
afterAll(async () => {
  gpu?.destroy();
  await Deno.remove(dir, { recursive: true });
});

describe("prompt-cache files", () => {
  test("cache-prompt, then generate --prompt-cache-file: same ids as reading the whole prompt", async () => {
    const made = await cli("cache_prompt.ts", [
      "--prompt-file",
      `${dir}/doc.txt`,
      "--out",
      `${dir}/doc.flint`,
    ]);
    expect(made.code, made.stderr).toBe(0);
    expect(made.stderr).toMatch(/prompt tokens \(\d+ as KV pages/);
    const gen = ["--max-tokens", "12", "--json", "--context-window", "2048"];
    const cached = await cli("generate.ts", [
      ...gen,
      "--prompt-cache-file",
      `${dir}/doc.flint`,
      "--prompt",
      QUESTION,
    ]);
    expect(cached.code, cached.stderr).toBe(0);
    const a = JSON.parse(cached.stdout.trim().split("\n").pop()!);
    const whole = await cli("generate.ts", [...gen, "--prompt-file", `${dir}/whole.txt`]);
    const b = JSON.parse(whole.stdout.trim().split("\n").pop()!);
    // The document ends in a newline, so tokenizing it apart from the question changes no token.
    expect(a.prompt_tokens).toBe(b.prompt_tokens);
    expect(a.cached_tokens).toBeGreaterThan(0.9 * a.prompt_tokens - 16);
    expect(b.cached_tokens).toBe(0);
    expect(a.token_ids).toEqual(b.token_ids);
  });

  test("another KV cache format is refused, naming the file", async () => {
    const r = await cli("generate.ts", [
      "--kv-cache",
      "q8",
      "--prompt-cache-file",
      `${dir}/doc.flint`,
      "--prompt",
      "x",
    ]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(
      `--prompt-cache-file ${dir}/doc.flint: made for another model or KV cache format`,
    );
  });

  test("a file that is not a prompt cache is refused, naming the file", async () => {
    const r = await cli("generate.ts", [
      "--prompt-cache-file",
      `${DEFAULT_MODEL}/model.safetensors`,
      "--prompt",
      "x",
    ]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("not a Flint prompt-cache file");
  });
});

/** Greedy ids of `prompt` on a scheduler of its own (generate.ts's), and the tokens it reused. */
async function greedy(engine: Engine, opts: SchedulerOptions, prompt: number[]) {
  const s = new Scheduler(engine, opts);
  try {
    const r = await s.submit({ prompt, maxTokens: 8 }).result;
    if (r.error) throw r.error;
    return { ids: r.tokenIds, cached: r.cachedTokens };
  } finally {
    await s.close();
    s.prefixCache?.clear();
  }
}

for (const name of ["qwen3_next_long", "lfm2", "gemma3_text"]) {
  describe(`${name}: prompt-cache files with per-sequence state`, () => {
    test("cached up to a state snapshot; generating from the file gives the ids of a whole run", async () => {
      gpu ??= await Gpu.create();
      const model = `${FIXTURES}/${name}`;
      const engine = await Engine.load(new DiskModelSource(model), {
        gpu,
        contextWindow: 512,
        maxBatch: 1,
        prefillChunk: 64,
        kvBudget: 16 << 20,
        warmup: false,
      });
      try {
        const d = engine.config.hybrid?.deltanet;
        // Snapshots sit at multiples of lcm(page size 16, DeltaNet chunk length) (prefix_state.ts).
        const unit = d ? Math.max(16, deltaChunkLen(gpu.info, d.dk, d.dv)) : 16;
        const g = await readGolden(model);
        const doc = Array.from(
          { length: Math.max(g.inputIds.length, unit + 21) },
          (_, i) => g.inputIds[i % g.inputIds.length],
        );
        const question = doc.slice(5, 19);
        const out = `${dir}/${name}.flint`;
        const made = await savePromptCache(engine, model, doc, out);
        expect((await Deno.stat(out)).size).toBe(made.bytes);
        expect(made.cachedTokens).toBe(Math.floor((doc.length - 1) / unit) * unit);
        expect(made.cachedTokens).toBeGreaterThan(0);

        const cache = await openPromptCache(engine, model, out);
        expect(cache.ids).toEqual(doc);
        const prompt = [...cache.ids, ...question];
        const fromFile = await greedy(engine, { prefixFolder: cache.prefixFolder }, prompt);
        const whole = await greedy(engine, { prefixCacheBytes: 0 }, prompt);
        expect(fromFile.cached).toBe(made.cachedTokens);
        expect(whole.cached).toBe(0);
        expect(fromFile.ids).toEqual(whole.ids);
        expect(whole.ids.length).toBe(8);

        const short = doc.slice(0, unit);
        const err = await savePromptCache(engine, model, short, `${dir}/short.flint`).catch((e) => e);
        expect(err).toBeInstanceOf(ValidationError);
        expect(err.message).toContain(`the prompt has ${unit} tokens; a cache needs at least ${unit + 1}`);
        await expect(Deno.stat(`${dir}/short.flint`)).rejects.toThrow();
        expect(engine.kv.usedPages).toBe(0);
        expect(gpu.takeErrors()).toEqual([]);
      } finally {
        engine.kv.destroy();
      }
    });
  });
}
