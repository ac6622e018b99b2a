/**
 * `convert` on the MoE and hybrid fixtures: experts, DeltaNet and short-conv projections quantized to MLX
 * 8-bit g32 (per-expert names kept), routers, conv kernels and norms left in float; the converted model
 * loads and picks the goldens' top token at ≥ 2/3 of the prompt positions (f32 path). These random fixtures
 * are very sensitive: 8-bit weights move the dense qwen3 fixture's logits by up to 0.19, flip MoE routes and
 * compound through the DeltaNet recurrence, so the logits themselves are not compared; the quantized
 * loading paths (row ranges, expert stacks) are checked exactly in test/loader/weights_test.ts.
 */
import { afterAll, expect, test } from "vitest";
import { convert } from "../../src/loader/convert.ts";
import { readTensorIndex } from "../../src/loader/safetensors.ts";
import { Engine } from "../../src/engine/engine.ts";
import { Gpu } from "../../src/gpu/device.ts";
import { DiskModelSource } from "../../src/platform/deno.ts";
import { FIXTURES, readGolden, topAgreement } from "../util/fixtures.ts";

const dirs: string[] = [];
let gpu: Gpu | null = null;
afterAll(async () => {
  gpu?.destroy();
  for (const d of dirs) await Deno.remove(d, { recursive: true }).catch(() => {});
});

for (const name of ["qwen3_moe", "qwen3_next", "lfm2"]) {
  test(`${name}: converted to 8-bit g32, routers in float, mostly the goldens' top tokens`, async () => {
    const out = await Deno.makeTempDir({ prefix: "flint-convert-hybrid-" });
    dirs.push(out);
    await convert({ hf: `${FIXTURES}/${name}`, out, bits: 8, groupSize: 32, force: true, log: () => {} });
    const { tensors } = await readTensorIndex(new DiskModelSource(out));
    const dtypes = [...tensors.values()].map((t) => [t.name, t.dtype] as const);
    const quantized = dtypes.filter(([, d]) => d === "U32").map(([n]) => n);
    expect(quantized.length).toBeGreaterThan(0);
    expect(quantized.filter((n) => /mlp\.gate\.weight|shared_expert_gate|conv1d|conv\.conv/.test(n))).toEqual(
      [],
    );
    if (name !== "lfm2") expect(quantized).toContain("model.layers.0.mlp.experts.3.up_proj.weight");
    gpu ??= await Gpu.create({ f16: false });
    const engine = await Engine.load(new DiskModelSource(out), {
      gpu,
      contextWindow: 128,
      maxBatch: 1,
      logitRows: 64,
      kvBudget: 16 << 20,
      warmup: false,
    });
    const g = await readGolden(`${FIXTURES}/${name}`);
    const V = engine.config.dims.vocab;
    const logits = await engine.forwardLogits(g.inputIds);
    expect(logits.every(Number.isFinite)).toBe(true);
    expect(topAgreement(logits, g.logits, V)).toBeGreaterThanOrEqual(Math.ceil((2 * g.inputIds.length) / 3));
    engine.kv.destroy();
  });
}
