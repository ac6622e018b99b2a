/**
 * The prefix cache with recurrent layers (Qwen3-Next and LFM2 fixtures, lavapipe) or sliding-window KV
 * rings (Gemma 3): a sequence saves its recurrent state (its rings' last window) at its prompt's last full
 * page boundary that is also a chunk boundary of the chunked DeltaNet prefill (Qwen3-Next: 64 tokens); a
 * later prompt that starts with that run resumes
 * from the snapshot (its slot's state restored) and its greedy ids equal those with the cache off. Prompts
 * that only share a shorter run, without a snapshot, prefill whole.
 */
import { afterAll, describe, expect, test } from "vitest";
import { Engine } from "../../src/engine/engine.ts";
import { Scheduler } from "../../src/engine/scheduler.ts";
import { Gpu } from "../../src/gpu/device.ts";
import { DiskModelSource } from "../../src/platform/deno.ts";
import { deltaChunkLen } from "../../src/ops/recurrent.ts";
import { FIXTURES, readGolden } from "../util/fixtures.ts";

let gpu: Gpu | null = null;
afterAll(() => gpu?.destroy());

async function run(s: Scheduler, prompt: number[]): Promise<{ ids: number[]; cached: number }> {
  const r = await s.submit({ prompt, maxTokens: 8 }).result;
  return { ids: r.tokenIds, cached: r.cachedTokens };
}

for (const name of ["qwen3_next", "lfm2", "gemma3_text"]) {
  describe(`${name}: prefix cache with recurrent state`, () => {
    test("a follow-up turn resumes at the snapshot and matches the uncached run", async () => {
      gpu ??= await Gpu.create();
      const engine = await Engine.load(new DiskModelSource(`${FIXTURES}/${name}`), {
        gpu,
        contextWindow: 512,
        maxBatch: 2,
        prefillChunk: 64,
        kvBudget: 16 << 20,
        warmup: false,
      });
      // Snapshots sit on page boundaries (16) that are also chunk boundaries of the chunked DeltaNet.
      const d = engine.config.hybrid?.deltanet;
      const unit = d ? Math.max(16, deltaChunkLen(gpu.info, d.dk, d.dv)) : 16;
      const at = (n: number) => Math.floor((n - 1) / unit) * unit;
      const g = await readGolden(`${FIXTURES}/${name}`);
      const first = Array.from(
        { length: Math.max(g.inputIds.length, unit + 21) },
        (_, i) => g.inputIds[i % g.inputIds.length],
      );
      const off = new Scheduler(engine, { prefixCacheBytes: 0 });
      const a = await run(off, first);
      const followUp = [...first, ...a.ids, ...first.slice(3, unit + 20)];
      const b = await run(off, followUp);
      const sibling = [...first.slice(0, unit - 3), ...first.slice(5, 30)]; // no snapshot on the shared run
      const c = await run(off, sibling);
      await off.close();

      const on = new Scheduler(engine, {});
      expect(await run(on, first)).toEqual({ ids: a.ids, cached: 0 });
      expect(await run(on, followUp)).toEqual({ ids: b.ids, cached: at(first.length) });
      expect(await run(on, first)).toEqual({ ids: a.ids, cached: at(first.length) });
      expect(await run(on, sibling)).toEqual({ ids: c.ids, cached: 0 });
      // Both sequences' snapshots: the longer prompt saved its own boundary, deeper than the first's.
      const deeper = [...followUp, ...a.ids];
      const e = await run(on, deeper);
      expect(e.cached).toBe(at(followUp.length));
      expect(e.cached).toBeGreaterThan(at(first.length));
      await on.close();
      const off2 = new Scheduler(engine, { prefixCacheBytes: 0 });
      expect((await run(off2, deeper)).ids).toEqual(e.ids);
      await off2.close();
      expect(gpu.takeErrors()).toEqual([]);
      engine.kv.destroy();
    });
  });
}
