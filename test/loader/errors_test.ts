/**
 * Bad model folders fail with a LoaderError naming the file, the tensor or field, and what was expected; and
 * the other loading paths (sharded checkpoints, 8-bit weights, streamed detokenization) work end to end.
 */
import { afterAll, describe, expect, test } from "vitest";
import { Engine } from "../../src/engine/engine.ts";
import { Scheduler } from "../../src/engine/scheduler.ts";
import { LoaderError, UnsupportedModelError } from "../../src/errors.ts";
import { Gpu } from "../../src/gpu/device.ts";
import { convert } from "../../src/loader/convert.ts";
import { DiskModelSource } from "../../src/platform/deno.ts";
import { FIXTURES, readGolden, ROOT } from "../util/fixtures.ts";

const gpu = await Gpu.create();
afterAll(() => gpu.destroy());
const opts = { gpu, contextWindow: 128, maxBatch: 2, logitRows: 64, kvBudget: 16 << 20, warmup: false };

/** A copy of a fixture folder in a temp dir, with `edit` applied. */
async function variant(name: string, edit: (dir: string) => Promise<void>): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix: "flint-bad-" });
  for await (const e of Deno.readDir(`${FIXTURES}/${name}`)) {
    await Deno.copyFile(`${FIXTURES}/${name}/${e.name}`, `${dir}/${e.name}`);
  }
  await edit(dir);
  return dir;
}
async function loadError(dir: string): Promise<LoaderError> {
  try {
    await Engine.load(new DiskModelSource(dir), opts);
  } catch (e) {
    if (e instanceof LoaderError) return e;
    throw e;
  }
  throw new Error("expected a LoaderError");
}
async function editConfig(dir: string, f: (c: any) => void) {
  const c = JSON.parse(await Deno.readTextFile(`${dir}/config.json`));
  f(c);
  await Deno.writeTextFile(`${dir}/config.json`, JSON.stringify(c));
}

describe("bad model folders name the file and the field", () => {
  test("unknown model_type lists the supported ones", async () => {
    const e = await loadError(await variant("qwen3", (d) => editConfig(d, (c) => (c.model_type = "mamba"))));
    expect(e).toBeInstanceOf(UnsupportedModelError);
    expect(e.message).toMatch(
      new RegExp(
        'config\\.json: model_type: unsupported model_type "mamba"; supported: llama, qwen2, qwen3, ' +
          "qwen3_moe, qwen3_next, qwen3_5_text, qwen3_5_moe_text, qwen3_5, qwen3_5_moe, lfm2, gemma3_text",
      ),
    );
  });

  test("an unsupported layer type in layer_types lists the supported ones", async () => {
    const e = await loadError(
      await variant("qwen3_next", (d) => editConfig(d, (c) => (c.layer_types[1] = "mamba"))),
    );
    expect(e).toBeInstanceOf(LoaderError);
    expect(e.message).toMatch(
      /config\.json: layer_types: layer type "mamba" is not supported \(supported: linear_attention, full_attention\)/,
    );
  });
  test("a missing config field", async () => {
    const e = await loadError(await variant("qwen3", (d) => editConfig(d, (c) => delete c.hidden_size)));
    expect(e.message).toMatch(/config\.json: hidden_size: required integer is missing/);
  });
  test("a config field of the wrong type", async () => {
    const e = await loadError(
      await variant("llama", (d) => editConfig(d, (c) => (c.num_attention_heads = "four"))),
    );
    expect(e.message).toMatch(/num_attention_heads: expected a non-negative integer, got "four"/);
  });
  test("a truncated safetensors file", async () => {
    const dir = await variant("qwen3", async (d) => {
      const b = await Deno.readFile(`${d}/model.safetensors`);
      await Deno.writeFile(`${d}/model.safetensors`, b.subarray(0, b.length - 1000));
    });
    const e = await loadError(dir);
    expect(e.message).toMatch(
      /model\.safetensors: .+: data ends at byte \d+ but the file has \d+ bytes \(truncated\?\)/,
    );
  });
  test("a header that is not JSON", async () => {
    const dir = await variant("qwen3", async (d) => {
      const b = await Deno.readFile(`${d}/model.safetensors`);
      b[8] = 0x78; // the header's opening '{' becomes 'x': not JSON any more
      await Deno.writeFile(`${d}/model.safetensors`, b);
    });
    expect((await loadError(dir)).message).toMatch(/model\.safetensors: header: header is not valid JSON/);
  });
  test("a tensor whose shape does not match the config", async () => {
    const e = await loadError(
      await variant("qwen3", (d) => editConfig(d, (c) => (c.intermediate_size = 96))),
    );
    expect(e.message).toMatch(
      /model\.layers\.0\.mlp\.gate_proj\.weight: expected \[96, 64\], got \[128,64\]/,
    );
  });
  test("quantized tensors with the wrong group size in the config", async () => {
    const e = await loadError(
      await variant("qwen3-mlx-4bit", (d) =>
        editConfig(d, (c) => {
          c.quantization.group_size = 64;
          c.quantization_config.group_size = 64;
        })),
    );
    expect(e.message).toMatch(/\.scales: expected \[\d+, 1\] \(group size 64\), got \[\d+,2\]/);
  });
  test("an unsupported quantization", async () => {
    const e = await loadError(
      await variant("qwen3-mlx-4bit", (d) => editConfig(d, (c) => (c.quantization.bits = 7))),
    );
    expect(e.message).toMatch(/config\.json: quantization\.bits: expected one of 2, 3, 4, 5, 6, 8, got 7/);
  });
  test("a missing folder and a folder without weights", async () => {
    expect((await loadError("/nonexistent/model")).message).toMatch(
      /\/nonexistent\/model: cannot read model folder/,
    );
    const empty = await Deno.makeTempDir();
    await Deno.copyFile(`${FIXTURES}/qwen3/config.json`, `${empty}/config.json`);
    expect((await loadError(empty)).message).toMatch(/no \.safetensors file in the model folder/);
  });
});

describe("loading paths", () => {
  test("a sharded checkpoint loads and gives the same logits as the single file", async () => {
    const one = await Deno.makeTempDir();
    const many = await Deno.makeTempDir();
    await convert({
      hf: `${FIXTURES}/qwen3`,
      out: `${one}/m`,
      bits: 4,
      groupSize: 32,
      force: false,
      maxShardBytes: 5 << 30,
    });
    await convert({
      hf: `${FIXTURES}/qwen3`,
      out: `${many}/m`,
      bits: 4,
      groupSize: 32,
      force: false,
      maxShardBytes: 40_000,
    });
    const files = [...Deno.readDirSync(`${many}/m`)].map((e) => e.name);
    expect(files).toContain("model.safetensors.index.json");
    expect(files.filter((f) => /^model-\d{5}-of-\d{5}\.safetensors$/.test(f)).length).toBeGreaterThan(2);
    const ids = (await readGolden(`${FIXTURES}/qwen3`)).inputIds;
    const a = await (await Engine.load(new DiskModelSource(`${one}/m`), opts)).forwardLogits(ids);
    const b = await (await Engine.load(new DiskModelSource(`${many}/m`), opts)).forwardLogits(ids);
    expect(b).toEqual(a);
  });

  test("an 8-bit MLX model (the bundled draft) reproduces its golden greedy ids", async () => {
    const dir = `${ROOT}models/flint-coder-6m-draft-mlx-8bit`;
    const golden = JSON.parse(await Deno.readTextFile(`${dir}/golden.json`));
    const engine = await Engine.load(new DiskModelSource(dir), { ...opts, contextWindow: 256 });
    expect(engine.config.quant?.default.bits).toBe(8);
    const sched = new Scheduler(engine);
    for (const g of golden.slice(0, 2)) {
      const r = await sched.submit({ prompt: g.prompt_ids, maxTokens: g.greedy_ids.length }).result;
      expect(r.tokenIds).toEqual(g.greedy_ids);
    }
    await sched.close();
  });

  test("streamed detokenization never emits half a UTF-8 character", async () => {
    const engine = await Engine.load(new DiskModelSource(`${ROOT}models/flint-coder-19m-mlx-4bit`), {
      ...opts,
      contextWindow: 64,
    });
    const tok = engine.tokenizer!;
    const text = "naïve café → 世界 🎉🦀 done";
    const ids = tok.encode(text);
    // The byte-level BPE splits some of these characters across several tokens.
    expect(ids.length).toBeGreaterThan([...text].length / 2);
    const s = tok.stream();
    const pieces = ids.map((id) => s.push(id));
    pieces.push(s.flush());
    for (const p of pieces) expect(p).not.toContain("\uFFFD");
    expect(pieces.join("")).toBe(tok.decode(ids));
    expect(pieces.join("")).toBe(text);
    // Somewhere a token completed nothing printable on its own (a split character was held back).
    expect(pieces.slice(0, -1).some((p) => p === "")).toBe(true);
  });
});
