/**
 * Multimodal wrappers as Qwen3.5 / 3.6 are released (model_type `qwen3_5` / `qwen3_5_moe`, the text config
 * under `text_config`, vision tensors beside the text weights), built here from the qwen3_5_text and
 * qwen3_5_moe_text fixtures (the MoE one with its experts fused, as the released HF checkpoints have them):
 * - HF names (`model.language_model.*`, `model.visual.*`): loads as the text model (config.modelType the
 *   inner type), the same logits as the unwrapped fixture exactly, EOS ids from text_config, the tokenizer
 *   and chat template read as for any model;
 * - `convert` on it: mlx-lm's names (`language_model.model.*`, `language_model.lm_head.*`), the vision tower
 *   dropped and said so, every tensor byte for byte the flat conversion's; it loads to the flat conversion's
 *   logits exactly; so does an mlx-vlm-style wrapper of the flat conversion with `vision_tower.*` tensors;
 * - `convert` drops a tied `lm_head.weight` and `mtp.*` tensors of a wrapper too;
 * - errors: an unknown outer model_type lists the supported ones; a text_config of another model or a missing
 *   text_config field names `text_config`.
 */
import { afterAll, describe, expect, test } from "vitest";
import { Engine } from "../../src/engine/engine.ts";
import { LoaderError, UnsupportedModelError } from "../../src/errors.ts";
import { Gpu } from "../../src/gpu/device.ts";
import { convert } from "../../src/loader/convert.ts";
import { Tokenizer } from "../../src/loader/tokenizer.ts";
import { DiskModelSource } from "../../src/platform/deno.ts";
import { DEFAULT_MODEL, FIXTURES, readGolden } from "../util/fixtures.ts";
import { countMismatches } from "../util/quantize.ts";
import { fuseExperts, readConfig, readTensors, type Tensor, wrap, writeModel } from "./checkpoints.ts";

const gpu = await Gpu.create({ f16: false });
const dirs: string[] = [];
afterAll(async () => {
  gpu.destroy();
  for (const d of dirs) await Deno.remove(d, { recursive: true }).catch(() => {});
});
async function tmp(): Promise<string> {
  const d = await Deno.makeTempDir({ prefix: "flint-wrapped-" });
  dirs.push(d);
  return d;
}
const opts = { gpu, contextWindow: 128, maxBatch: 1, logitRows: 64, kvBudget: 16 << 20, warmup: false };

async function load(dir: string): Promise<Engine> {
  return await Engine.load(new DiskModelSource(dir), opts);
}
async function logits(dir: string, ids: number[]): Promise<Float32Array> {
  const engine = await load(dir);
  const out = await engine.forwardLogits(ids);
  engine.kv.destroy();
  expect(gpu.takeErrors()).toEqual([]);
  return out;
}
async function loadError(dir: string): Promise<LoaderError> {
  try {
    await load(dir);
  } catch (e) {
    if (e instanceof LoaderError) return e;
    throw e;
  }
  throw new Error("expected a LoaderError");
}

const CASES = [
  { inner: "qwen3_5_text", outer: "qwen3_5", fused: false },
  { inner: "qwen3_5_moe_text", outer: "qwen3_5_moe", fused: true },
];

describe.each(CASES)("$outer wrapping $inner", ({ inner, outer, fused }) => {
  const fixture = `${FIXTURES}/${inner}`;
  /** The text model's tensors (MoE experts fused) as a flat checkpoint, and the same wrapped HF-style. */
  async function flatAndWrapped(): Promise<{ flat: string; hf: string }> {
    const base = await readTensors(fixture);
    const tensors = fused ? fuseExperts(base) : base;
    const flat = await tmp();
    await writeModel(flat, tensors, await readConfig(fixture), fixture);
    const hf = await tmp();
    const w = wrap(tensors, await readConfig(fixture), { outer, mlx: false });
    w.config.text_config.eos_token_id = 7;
    await writeModel(hf, w.tensors, w.config, fixture);
    for (const f of ["tokenizer.json", "tokenizer_config.json"]) {
      await Deno.copyFile(`${DEFAULT_MODEL}/${f}`, `${hf}/${f}`);
    }
    return { flat, hf };
  }
  let made: Promise<{ flat: string; hf: string }> | null = null;
  const dirsOf = () => (made ??= flatAndWrapped());

  test("HF names: loads as the text model with the unwrapped fixture's logits, EOS, tokenizer", async () => {
    const { hf } = await dirsOf();
    const names = (await readTensors(hf)).map((t) => t.name);
    expect(names.filter((n) => n.startsWith("model.visual.")).length).toBe(2);
    expect(names).toContain("model.language_model.embed_tokens.weight");
    expect(names.filter((n) => n.startsWith("model.layers.")).length).toBe(0);
    if (fused) expect(names).toContain("model.language_model.layers.0.mlp.experts.gate_up_proj");

    const engine = await load(hf);
    expect(engine.config.modelType).toBe(inner);
    expect(engine.eosIds).toEqual([7]);
    const want = await Tokenizer.load(new DiskModelSource(DEFAULT_MODEL));
    const chat = [{ role: "user" as const, content: "hi" }];
    expect(engine.tokenizer!.applyChatTemplate(chat)).toBe(want.applyChatTemplate(chat));
    expect(engine.tokenizer!.encode("def f(x):")).toEqual(want.encode("def f(x):"));
    engine.kv.destroy();

    const g = await readGolden(fixture);
    expect(await logits(hf, g.inputIds)).toEqual(await logits(fixture, g.inputIds));
  });

  test("convert: mlx-lm names, vision dropped (and said), the flat conversion's bytes, logits", async () => {
    const { flat, hf } = await dirsOf();
    const [flatOut, hfOut] = [`${await tmp()}/out`, `${await tmp()}/out`];
    await convert({ hf: flat, out: flatOut, bits: 8, groupSize: 32, log: () => {} });
    const lines: string[] = [];
    const s = await convert({ hf, out: hfOut, bits: 8, groupSize: 32, log: (l) => lines.push(l) });
    expect(s.dropped).toEqual(["model.visual.blocks.0.attn.qkv.weight", "model.visual.norm.weight"]);
    expect(lines[0]).toBe("dropping 2 vision tower tensors: Flint serves the text model only");
    expect(lines.at(-1)).toMatch(/, 2 dropped \(2 of them the vision tower's\);/);
    expect(s.files).toContain("tokenizer.json");

    const want = await readTensors(flatOut);
    const got = await readTensors(hfOut);
    expect(got.map((t) => t.name)).toEqual(want.map((t) => `language_model.${t.name}`));
    expect(got.map((t) => t.name)).toContain("language_model.lm_head.weight");
    if (fused) {
      expect(got.map((t) => t.name)).toContain("language_model.model.layers.0.mlp.switch_mlp.up_proj.scales");
    }
    for (const [i, t] of got.entries()) {
      expect([t.dtype, t.shape], t.name).toEqual([want[i].dtype, want[i].shape]);
      expect(countMismatches(t.data, want[i].data), t.name).toBe(0);
    }
    const config = await readConfig(hfOut);
    expect(config.model_type).toBe(outer);
    expect(config.text_config.model_type).toBe(inner);
    expect(config.quantization).toEqual({ group_size: 32, bits: 8, mode: "affine" });

    const g = await readGolden(fixture);
    const ref = await logits(flatOut, g.inputIds);
    expect(await logits(hfOut, g.inputIds)).toEqual(ref);
    // mlx-vlm's layout of the same: language_model.* beside vision_tower.*, quantization at the top level.
    const mlx = await tmp();
    const w = wrap(want, await readConfig(flatOut), { outer, mlx: true });
    expect(w.config.quantization).toEqual(config.quantization);
    await writeModel(mlx, w.tensors, w.config, fixture);
    expect((await readTensors(mlx)).filter((t) => t.name.startsWith("vision_tower.")).length).toBe(2);
    expect(await logits(mlx, g.inputIds)).toEqual(ref);
  });
});

test("convert drops a wrapper's tied head and MTP tensors, as mlx-lm's sanitize does", async () => {
  const fixture = `${FIXTURES}/qwen3_5_text`;
  const base = await readTensors(fixture);
  const w = wrap(base, await readConfig(fixture), { outer: "qwen3_5", mlx: false });
  // mlx-lm reads the text model's own flag (its TextModelArgs come from text_config).
  w.config.text_config.tie_word_embeddings = true;
  const norm = base.find((t) => t.name === "model.norm.weight")!;
  const mtp = { ...norm, name: "mtp.layers.0.input_layernorm.weight" };
  const hf = await tmp();
  await writeModel(hf, [...w.tensors, mtp], w.config, fixture);
  const s = await convert({ hf, out: `${hf}/out`, bits: 4, groupSize: 32, log: () => {} });
  expect(s.dropped.sort()).toEqual([
    "lm_head.weight",
    "model.visual.blocks.0.attn.qkv.weight",
    "model.visual.norm.weight",
    "mtp.layers.0.input_layernorm.weight",
  ]);
  const names = (await readTensors(`${hf}/out`)).map((t) => t.name);
  expect(names).toContain("language_model.model.embed_tokens.weight");
  expect(names.filter((n) => !n.startsWith("language_model.model."))).toEqual([]);
});

describe("wrapper errors", () => {
  async function variant(edit: (c: Record<string, any>) => void): Promise<string> {
    const fixture = `${FIXTURES}/qwen3_5_text`;
    const w = wrap(await readTensors(fixture), await readConfig(fixture), { outer: "qwen3_5", mlx: false });
    edit(w.config);
    const d = await tmp();
    await writeModel(d, w.tensors as Tensor[], w.config, fixture);
    return d;
  }

  test("an unknown outer model_type lists the supported ones, the wrappers included", async () => {
    const e = await loadError(await variant((c) => (c.model_type = "qwen3_vl")));
    expect(e).toBeInstanceOf(UnsupportedModelError);
    expect(e.message).toMatch(
      /config\.json: model_type: unsupported model_type "qwen3_vl"; supported: llama, /,
    );
    expect(e.message).toMatch(/, qwen3_5_text, qwen3_5_moe_text, qwen3_5, qwen3_5_moe, /);
  });

  test("a text_config of another model, and a missing text_config field, name text_config", async () => {
    const other = await loadError(await variant((c) => (c.text_config.model_type = "qwen3_5_moe_text")));
    expect(other.message).toMatch(
      new RegExp(
        'config\\.json: text_config: model_type: "qwen3_5_moe_text": ' +
          "the text model of a qwen3_5 checkpoint is qwen3_5_text",
      ),
    );
    const missing = await loadError(await variant((c) => delete c.text_config.hidden_size));
    expect(missing.message).toMatch(/config\.json: text_config: hidden_size: required integer is missing/);
  });
});
