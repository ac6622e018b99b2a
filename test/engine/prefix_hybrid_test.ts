/**
 * The prefix cache with recurrent layers (Qwen3-Next and LFM2 fixtures, lavapipe): a sequence saves its
 * recurrent state at its prompt's last full page boundary; a later prompt that starts with that run resumes
 * from the snapshot (its slot's state restored) and its greedy ids equal those with the cache off. Prompts
 * that only share a shorter run, without a snapshot, prefill whole.
 */
import { afterAll, describe, expect, test } from "vitest";
import { Engine } from "../../src/engine/engine.ts";
import { Scheduler } from "../../src/engine/scheduler.ts";
import { Gpu } from "../../src/gpu/device.ts";
import { DiskModelSource } from "../../src/platform/deno.ts";
import { FIXTURES, readGolden } from "../util/fixtures.ts";

let gpu: Gpu | null = null;
afterAll(() => gpu?.destroy());

async function run(s: Scheduler, prompt: number[]): Promise<{ ids: number[]; cached: number }> {
  const r = await s.submit({ prompt, maxTokens: 8 }).result;
  return { ids: r.tokenIds, cached: r.cachedTokens };
}

for (const name of ["qwen3_next", "lfm2"]) {
  describe(`${name}: prefix cache with recurrent state`, () => {
    test("a follow-up turn resumes at the snapshot and matches the uncached run", async () => {
      gpu ??= await Gpu.create();
      const engine = await Engine.load(new DiskModelSource(`${FIXTURES}/${name}`), {
        gpu,
        contextWindow: 256,
        maxBatch: 2,
        prefillChunk: 16,
        kvBudget: 16 << 20,
        warmup: false,
      });
      const g = await readGolden(`${FIXTURES}/${name}`);
      const first = g.inputIds; // 37 tokens: the state is saved after position 31 (two full pages)
      const off = new Scheduler(engine, { prefixCacheBytes: 0 });
      const a = await run(off, first);
      const followUp = [...first, ...a.ids, ...first.slice(3, 20)];
      const b = await run(off, followUp);
      const sibling = [...first.slice(0, 20), ...first.slice(5, 30)]; // shares one page, no snapshot there
      const c = await run(off, sibling);
      await off.close();

      const on = new Scheduler(engine, {});
      expect(await run(on, first)).toEqual({ ids: a.ids, cached: 0 });
      expect(await run(on, followUp)).toEqual({ ids: b.ids, cached: 32 });
      expect(await run(on, first)).toEqual({ ids: a.ids, cached: 32 });
      expect(await run(on, sibling)).toEqual({ ids: c.ids, cached: 0 });
      // Both sequences' snapshots: the longer prompt saved its own boundary, deeper than 32.
      const deeper = [...followUp, ...a.ids];
      const d = await run(on, deeper);
      expect(d.cached).toBe(Math.floor((followUp.length - 1) / 16) * 16);
      await on.close();
      const off2 = new Scheduler(engine, { prefixCacheBytes: 0 });
      expect((await run(off2, deeper)).ids).toEqual(d.ids);
      await off2.close();
      expect(gpu.takeErrors()).toEqual([]);
      engine.kv.destroy();
    });
  });
}
