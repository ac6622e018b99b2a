/**
 * The prefix cache's disk tier (bundled model, lavapipe): pages written while idle are read back by a new
 * scheduler (a restart) with the same greedy ids; another model's or KV type's folder, a corrupted file
 * and a truncated file are never used.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { Engine } from "../../src/engine/engine.ts";
import { Scheduler } from "../../src/engine/scheduler.ts";
import type { SchedulerOptions } from "../../src/engine/generation.ts";
import { DiskModelSource } from "../../src/platform/deno.ts";
import { DiskPageFolder, prefixFolder } from "../../src/platform/prefix_folder.ts";
import { DEFAULT_MODEL } from "../util/fixtures.ts";

let engine: Engine;
let root: string;
const PROMPT: number[] = [];

beforeAll(async () => {
  engine = await Engine.load(new DiskModelSource(DEFAULT_MODEL), {
    contextWindow: 512,
    maxBatch: 2,
    soloPrefillChunk: 64,
  });
  root = await Deno.makeTempDir({ prefix: "flint_prefix_" });
  let x = 12345;
  for (let i = 0; i < 200; i++) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    PROMPT.push(1 + ((x >>> 8) % (engine.config.dims.vocab - 1)));
  }
});
afterAll(async () => {
  engine.destroy();
  await Deno.remove(root, { recursive: true });
});

async function tier(e = engine, budgetBytes = 2 ** 30): Promise<SchedulerOptions["prefixFolder"]> {
  const { folder, fingerprint } = await prefixFolder(root, DEFAULT_MODEL, e);
  return { folder, fingerprint, budgetBytes, idleMs: 20 };
}

/** One request on a scheduler of its own; its cache's pages are given back to the pool after. */
async function run(opts: SchedulerOptions, prompt = PROMPT, e = engine) {
  const s = new Scheduler(e, opts);
  try {
    const r = await s.submit({ prompt, maxTokens: 8 }).result;
    return { r, stats: s.prefixCache?.snapshot() };
  } finally {
    await s.close();
    s.prefixCache?.clear();
    expect(e.kv.usedPages).toBe(0);
  }
}

async function files(dir: string): Promise<string[]> {
  const out: string[] = [];
  for await (const f of Deno.readDir(dir)) out.push(f.name);
  return out;
}

describe("prefix cache disk tier", () => {
  let want: number[];
  let dir: string;

  test("pages written while idle are loaded by a new scheduler (a restart); same greedy ids", async () => {
    want = (await run({ prefixCacheBytes: 0 })).r.tokenIds;
    const t = await tier();
    dir = t!.folder.where;
    const s = new Scheduler(engine, { prefixFolder: t });
    const r1 = await s.submit({ prompt: PROMPT, maxTokens: 8 }).result;
    expect(r1.cachedTokens).toBe(0);
    // The idle spill starts 20 ms after the GPU goes idle.
    for (let i = 0; i < 200 && !(s.prefixStore!.bytes > 0 && !s.prefixStore!.pending); i++) {
      await new Promise((r) => setTimeout(r, 50));
    }
    await s.prefixStore!.settled();
    expect(s.prefixStore!.pending).toBe(false);
    await s.close();
    s.prefixCache!.clear();
    expect((await files(dir)).filter((f) => f.endsWith(".safetensors")).length).toBeGreaterThan(0);

    const { r, stats } = await run({ prefixFolder: await tier() });
    expect(r.cachedTokens).toBe(192);
    expect(stats!.tokensLoaded).toBe(192);
    expect(r.tokenIds).toEqual(want);
  });

  test("pages evicted while the loop never idles are written from the group that reuses them", async () => {
    const root2 = await Deno.makeTempDir({ prefix: "flint_prefix_evict_" });
    try {
      const { folder, fingerprint } = await prefixFolder(root2, DEFAULT_MODEL, engine);
      const tier2 = { folder, fingerprint, budgetBytes: 2 ** 30, idleMs: 3_600_000 };
      const other = PROMPT.map((t) => 1 + ((t * 7) % (engine.config.dims.vocab - 1)));
      const s = new Scheduler(engine, { prefixCacheBytes: 4 * engine.kv.bytesPerPage, prefixFolder: tier2 });
      try {
        await s.submit({ prompt: PROMPT, maxTokens: 2 }).result;
        expect(s.prefixStore!.files).toEqual([]);
        // Its prefill evicts PROMPT's 4 idle pages; its decode groups copy them out before reusing them.
        await s.submit({ prompt: other, maxTokens: 40 }).result;
        for (let i = 0; i < 100 && !s.prefixStore!.files.length; i++) {
          await new Promise((r) => setTimeout(r, 50));
        }
        await s.prefixStore!.settled();
        expect(s.prefixStore!.files.map((f) => f.pages)).toEqual([4]);
      } finally {
        await s.close();
        s.prefixCache!.clear();
      }
      const { r, stats } = await run({ prefixFolder: tier2 });
      expect(r.cachedTokens).toBe(64);
      expect(stats!.tokensLoaded).toBe(64);
      expect(r.tokenIds).toEqual(want);
    } finally {
      await Deno.remove(root2, { recursive: true });
    }
  });

  test("a longer prompt loads the stored prefix and prefills the rest", async () => {
    const longer = [...PROMPT, ...PROMPT.slice(0, 50).reverse()];
    const solo = (await run({ prefixCacheBytes: 0 }, longer)).r.tokenIds;
    const { r } = await run({ prefixFolder: await tier() }, longer);
    expect(r.cachedTokens).toBe(192);
    expect(r.tokenIds).toEqual(solo);
  });

  test("another KV cache type has its own folder, never these pages; q8 pages are shared too", async () => {
    const q8 = await Engine.load(new DiskModelSource(DEFAULT_MODEL), {
      contextWindow: 512,
      maxBatch: 2,
      kvCache: "q8",
      warmup: false,
    });
    try {
      const t = await tier(q8);
      expect(t!.folder.where).not.toBe(dir);
      const { r } = await run({ prefixFolder: t }, PROMPT, q8);
      expect(r.cachedTokens).toBe(0);
      // The 8-bit cache's pages (codes and scales) are shared like f16 ones: a memory hit, same ids.
      const s = new Scheduler(q8);
      await s.submit({ prompt: PROMPT, maxTokens: 2 }).result;
      const again = await s.submit({ prompt: PROMPT, maxTokens: 8 }).result;
      await s.close();
      expect(again.cachedTokens).toBe(192);
      expect(again.tokenIds).toEqual(r.tokenIds);
    } finally {
      q8.destroy();
    }
  });

  test("files of another fingerprint in the folder are deleted, not used", async () => {
    const t = await tier();
    const other = { ...t!, folder: new DiskPageFolder(dir), fingerprint: "another model", idleMs: 60_000 };
    const { r } = await run({ prefixFolder: other });
    expect(r.cachedTokens).toBe(0);
    expect((await files(dir)).length).toBe(0);
  });

  for (const damage of ["corrupted", "truncated"] as const) {
    test(`a ${damage} file is skipped with a warning and deleted; output unchanged`, async () => {
      const s = new Scheduler(engine, { prefixFolder: await tier() });
      await s.submit({ prompt: PROMPT, maxTokens: 2 }).result;
      await s.flushPrefixCache();
      await s.close();
      s.prefixCache!.clear();
      const names = (await files(dir)).filter((f) => f.endsWith(".safetensors"));
      expect(names.length).toBeGreaterThan(0);
      for (const n of names) {
        const bytes = await Deno.readFile(`${dir}/${n}`);
        if (damage === "corrupted") {
          for (let i = bytes.length - 4096; i < bytes.length - 4000; i++) bytes[i] ^= 0x5a;
          await Deno.writeFile(`${dir}/${n}`, bytes);
        } else await Deno.writeFile(`${dir}/${n}`, bytes.subarray(0, bytes.length - 1000));
      }
      const { r } = await run({ prefixFolder: await tier() });
      expect(r.cachedTokens).toBe(0);
      expect(r.tokenIds).toEqual(want);
      expect(await files(dir)).toEqual([]);
    });
  }
});
