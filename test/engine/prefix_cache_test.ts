/**
 * The prefix cache inside the scheduler (bundled model, lavapipe): a prompt that starts with a cached
 * prefix prefills only the rest, and its greedy ids equal those of the same prompt with the cache off;
 * pages are shared, evicted and freed without leaks.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { Engine } from "../../src/engine/engine.ts";
import { Scheduler } from "../../src/engine/scheduler.ts";
import { DiskModelSource } from "../../src/platform/deno.ts";
import { DEFAULT_MODEL } from "../util/fixtures.ts";

let engine: Engine;
let vocab: number;
const PS = 16;

/** Deterministic pseudo-random token ids (text-like ids would do as well; zeros would not). */
function tokens(n: number, seed: number): number[] {
  let x = seed * 2654435761 >>> 0;
  return Array.from({ length: n }, () => {
    x = (Math.imul(x ^ (x >>> 15), 0x2c1b3c6d) + 0x6d2b79f5) >>> 0;
    return 1 + (x % (vocab - 1));
  });
}

beforeAll(async () => {
  engine = await Engine.load(new DiskModelSource(DEFAULT_MODEL), {
    contextWindow: 512,
    maxBatch: 8,
    prefillChunk: 32,
    soloPrefillChunk: 48,
    pageSize: PS,
  });
  vocab = engine.config.dims.vocab;
});
afterAll(() => engine.destroy());

/** Greedy ids of `prompt` with the cache off (a scheduler of its own). */
async function solo(prompt: number[], maxTokens = 10): Promise<number[]> {
  const s = new Scheduler(engine, { prefixCacheBytes: 0 });
  try {
    const r = await s.submit({ prompt, maxTokens }).result;
    expect(r.cachedTokens).toBe(0);
    return r.tokenIds;
  } finally {
    await s.close();
  }
}

describe("prefix cache: greedy ids equal the uncached run", () => {
  const cases: [string, (base: number[]) => number[], number][] = [
    ["a match at a page boundary", (b) => [...b.slice(0, 96), ...tokens(37, 7)], 96],
    ["a match inside a page (recomputed from its start)", (b) => [...b.slice(0, 103), ...tokens(20, 8)], 96],
    ["the whole prompt cached (its last page is run again for the logits)", (b) => b, 144],
    ["the whole prompt cached, ending on a page boundary", (b) => b.slice(0, 144), 128],
    ["a longer prompt extending the cached one", (b) => [...b, ...tokens(70, 9)], 144],
  ];
  for (const [name, make, cached] of cases) {
    test(name, async () => {
      const base = tokens(150, 1);
      const prompt = make(base);
      const want = await solo(prompt);
      const s = new Scheduler(engine);
      try {
        const first = await s.submit({ prompt: base, maxTokens: 4 }).result;
        expect(first.cachedTokens).toBe(0);
        const r = await s.submit({ prompt, maxTokens: 10 }).result;
        expect(r.cachedTokens).toBe(cached);
        expect(r.tokenIds).toEqual(want);
        expect(s.prefixCache!.snapshot().hits).toBe(1);
      } finally {
        await s.close();
      }
      expect(engine.kv.usedPages).toBe(s.prefixCache!.pages);
      s.prefixCache!.clear();
      expect(engine.kv.usedPages).toBe(0);
    });
  }

  test("two requests sharing a prefix, run concurrently, each equal their solo run", async () => {
    const shared = tokens(120, 2);
    const a = [...shared, ...tokens(30, 3)];
    const b = [...shared, ...tokens(45, 4)];
    const [wa, wb] = [await solo(a, 24), await solo(b, 24)];
    const s = new Scheduler(engine);
    try {
      const ga = s.submit({ prompt: a, maxTokens: 24 });
      const gb = s.submit({ prompt: b, maxTokens: 24 });
      const [ra, rb] = await Promise.all([ga.result, gb.result]);
      expect(ra.tokenIds).toEqual(wa);
      expect(rb.tokenIds).toEqual(wb);
      // b's prefill starts after a's (one prompt at a time) and takes what a had written by then.
      expect(rb.cachedTokens).toBeGreaterThan(0);
      expect(rb.cachedTokens % PS).toBe(0);
    } finally {
      await s.close();
    }
    s.prefixCache!.clear();
    expect(engine.kv.usedPages).toBe(0);
  });
});

describe("prefix cache: budget, eviction, cancellation", () => {
  test("a 6-page budget, one by one, then 8 streams at once: outputs equal solo runs, no leak", async () => {
    // 3 shared pages, and a page of its own for each of the last five prompts: 8 pages for a budget of 6.
    const shared = tokens(48, 5);
    const prompts = Array.from({ length: 8 }, (_, i) => [...shared, ...tokens(9 + 3 * i, 10 + i)]);
    const want: number[][] = [];
    for (const p of prompts) want.push(await solo(p, 6));
    const s = new Scheduler(engine, { prefixCacheBytes: 6 * engine.kv.bytesPerPage });
    const check = (rs: { tokenIds: number[] }[], round: string) => {
      rs.forEach((r, i) => expect(r.tokenIds, `stream ${i}, ${round}`).toEqual(want[i]));
      const st = s.prefixCache!.snapshot();
      expect(st.pages).toBeLessThanOrEqual(6);
      expect(engine.kv.usedPages).toBe(st.pages);
    };
    try {
      const one: { tokenIds: number[] }[] = [];
      for (const prompt of prompts) one.push(await s.submit({ prompt, maxTokens: 6 }).result);
      check(one, "one by one");
      expect(s.prefixCache!.snapshot().evictions).toBeGreaterThan(0);
      check(
        await Promise.all(prompts.map((prompt) => s.submit({ prompt, maxTokens: 6 }).result)),
        "together",
      );
      expect(s.prefixCache!.snapshot().tokensReused).toBeGreaterThan(0);
    } finally {
      await s.close();
    }
    s.prefixCache!.clear();
    expect(engine.kv.usedPages).toBe(0);
  });

  test("a request needing most of the pool takes cached pages back instead of being refused", async () => {
    // A pool of 32 pages: 4 prompts leave 24 of them cached, then a prompt needing 16 pages comes.
    const small = await Engine.load(new DiskModelSource(DEFAULT_MODEL), {
      contextWindow: 256,
      maxBatch: 2,
      warmup: false,
    });
    const s = new Scheduler(small);
    try {
      expect(small.kv.shape.numPages).toBe(32);
      for (let i = 0; i < 4; i++) await s.submit({ prompt: tokens(100, 20 + i), maxTokens: 2 }).result;
      expect(s.prefixCache!.pages).toBe(24);
      expect(small.kv.freePages).toBe(8);
      const r = await s.submit({ prompt: tokens(250, 40), maxTokens: 4 }).result;
      expect(r.finishReason).toBe("length");
      expect(s.prefixCache!.snapshot().evictions).toBeGreaterThan(0);
      await s.close();
      s.prefixCache!.clear();
      expect(small.kv.usedPages).toBe(0);
    } finally {
      await s.close();
      small.destroy();
    }
  });

  test("a request cancelled mid-prefill leaves only pages it finished writing", async () => {
    const prompt = tokens(300, 6);
    const want = await solo(prompt);
    const s = new Scheduler(engine);
    try {
      const ac = new AbortController();
      let processed = 0;
      s.listeners.add((e) => {
        if (e.type === "prefill" && processed === 0) {
          processed = e.processed;
          ac.abort();
        }
      });
      const r = await s.submit({ prompt, maxTokens: 4, signal: ac.signal }).result;
      expect(r.finishReason).toBe("cancelled");
      expect(processed).toBe(48);
      // The first chunk was read back before the abort: its 3 full pages are cached, nothing after them.
      expect(s.prefixCache!.pages).toBe(3);
      const again = await s.submit({ prompt, maxTokens: 10 }).result;
      expect(again.cachedTokens).toBe(48);
      expect(again.tokenIds).toEqual(want);
    } finally {
      await s.close();
    }
    s.prefixCache!.clear();
    expect(engine.kv.usedPages).toBe(0);
  });
});
