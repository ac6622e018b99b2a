/**
 * Sliding-window layers' KV rings (engine/kv_ring.ts) on the Gemma 3 fixture with its window widened to 24
 * tokens (pages of 16, prefill chunks of 16, or 21 so that chunks straddle pages: rings of 3 pages) over a
 * prompt of 150 tokens, so each ring wraps many times: logits of every position and greedy ids equal those
 * of the layout that keeps every page (`kvRing: false`), bit for bit, on the f16 cache and the 8-bit one;
 * sliding layers' KV bytes are the ring's; and a prefix-cache hit (the ring's window restored from its
 * snapshot) gives the uncached ids.
 */
import { afterAll, expect, test } from "vitest";
import { Engine, type EngineOptions } from "../../src/engine/engine.ts";
import { Scheduler } from "../../src/engine/scheduler.ts";
import { Gpu } from "../../src/gpu/device.ts";
import { DiskModelSource } from "../../src/platform/deno.ts";
import { FIXTURES } from "../util/fixtures.ts";

const WINDOW = 24;
const dir = await Deno.makeTempDir({ prefix: "flint_ring_" });
const src = `${FIXTURES}/gemma3_text`;
const config = JSON.parse(await Deno.readTextFile(`${src}/config.json`));
await Deno.writeTextFile(`${dir}/config.json`, JSON.stringify({ ...config, sliding_window: WINDOW }));
for (const f of ["generation_config.json", "model.safetensors"]) {
  await Deno.symlink(`${src}/${f}`, `${dir}/${f}`);
}

let gpu: Gpu | null = null;
afterAll(async () => {
  gpu?.destroy();
  await Deno.remove(dir, { recursive: true });
});

// 150 ids from a fixed LCG over the vocabulary (512), skipping EOS (1) and padding (0).
let x = 12345;
const prompt = Array.from({ length: 150 }, () => (x = (x * 1103515245 + 12345) % 2 ** 31) % 510 + 2);

const opts: EngineOptions = {
  contextWindow: 512,
  maxBatch: 2,
  logitRows: 64,
  kvBudget: 16 << 20,
  warmup: false,
};

async function load(o: EngineOptions): Promise<{ engine: Engine; kvBytes: number }> {
  const before = gpu!.memory.bytes("kv");
  const engine = await Engine.load(new DiskModelSource(dir), { ...opts, gpu: gpu!, ...o });
  return { engine, kvBytes: gpu!.memory.bytes("kv") - before };
}

/** Greedy ids with the prefix cache off. */
async function greedy(engine: Engine, p: number[]): Promise<number[]> {
  const s = new Scheduler(engine, { stepsPerSubmit: 4, prefixCacheBytes: 0 });
  const r = await s.submit({ prompt: p, maxTokens: 12 }).result;
  await s.close();
  return r.tokenIds;
}

for (const [kvCache, chunk] of [["act", 16], ["act", 21], ["q8", 16]] as const) {
  test(`${kvCache} cache, ${chunk}-row chunks: the ring gives the numbers of every page kept`, async () => {
    gpu ??= await Gpu.create();
    if (kvCache === "q8" && !gpu.info.int8Dot) return expect.fail("adapter lacks packed int8 dot products");
    const ring = await load({ kvCache, prefillChunk: chunk });
    const pages = await load({ kvCache, prefillChunk: chunk, kvRing: false });
    const kv = ring.engine.kv;
    const shape = kv.shape;
    expect(shape.ring?.pages).toBe(3); // ≥ window + chunk + 2 decode rows − 1 keys
    expect(shape.ring!.pages * shape.pageSize).toBeLessThan(prompt.length / 2);
    expect(pages.engine.kv.ring).toBeNull();

    const a = await ring.engine.forwardLogits(prompt);
    const b = await pages.engine.forwardLogits(prompt);
    expect(a.some((v) => v !== 0)).toBe(true);
    expect(a.findIndex((v, i) => !Object.is(v, b[i]))).toBe(-1);
    const ids = await greedy(pages.engine, prompt);
    expect(ids.length).toBeGreaterThan(0);
    expect(await greedy(ring.engine, prompt)).toEqual(ids);

    // Layers 0-2 slide, 3 is global: a sliding layer's buffer holds maxSlots rings, the global one the pool.
    const sliding = shape.ring!.layers;
    expect(sliding).toEqual([0, 1, 2]);
    const perPage = kv.pageValueBytes + kv.pageScaleBytes;
    const ringPages = shape.maxSlots * shape.ring!.pages;
    for (const l of sliding) expect(kv.layers[l].size).toBe(ringPages * kv.pageValueBytes);
    expect(kv.layers[3].size).toBe(shape.numPages * kv.pageValueBytes);
    expect(kv.ring!.bytes).toBe(sliding.length * ringPages * perPage);
    // The pool's pages count the global layer alone; the rest of the difference is the ring's table.
    expect(kv.bytesPerPage).toBe(perPage);
    expect(pages.engine.kv.shape.numPages).toBe(shape.numPages);
    expect(pages.kvBytes - ring.kvBytes).toBe(
      sliding.length * (shape.numPages - ringPages) * perPage - shape.maxSlots * shape.maxPages * 4,
    );

    // Prefix cache: a follow-up turn resumes at the first prompt's last full page, ring window restored.
    const follow = [...prompt, ...ids, ...prompt.slice(7, 60)];
    const off = await greedy(ring.engine, follow);
    const s = new Scheduler(ring.engine, { stepsPerSubmit: 4 });
    await s.submit({ prompt, maxTokens: 12 }).result;
    // Another prompt in between takes the same slot and overwrites its ring: the hit must restore it.
    await s.submit({ prompt: prompt.map((t) => t ^ 1).slice(0, 80), maxTokens: 4 }).result;
    const hit = await s.submit({ prompt: follow, maxTokens: 12 }).result;
    await s.close();
    expect(hit.cachedTokens).toBe(Math.floor((prompt.length - 1) / 16) * 16);
    expect(hit.tokenIds).toEqual(off);
    expect(gpu.takeErrors()).toEqual([]);
    ring.engine.kv.destroy();
    pages.engine.kv.destroy();
  });
}
