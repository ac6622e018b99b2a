/**
 * The prefix cache's disk tier for models with per-sequence state (Qwen3-Next and LFM2: recurrent layers;
 * Gemma 3: sliding-window KV rings; lavapipe): a prompt's pages are flushed to files with the state
 * snapshot at its boundary; a new scheduler (memory empty) resumes a follow-up prompt from the files with
 * the greedy ids of a run without the cache. A file whose state bytes are damaged is deleted and the prompt
 * prefilled whole; a file without the state is never resumed from.
 */
import { afterAll, describe, expect, test } from "vitest";
import { Engine } from "../../src/engine/engine.ts";
import type { SchedulerOptions } from "../../src/engine/generation.ts";
import { pageChecksum } from "../../src/engine/prefix_file.ts";
import { Scheduler } from "../../src/engine/scheduler.ts";
import { Gpu } from "../../src/gpu/device.ts";
import { encodeSafetensors, readHeader, readTensorBytes } from "../../src/loader/safetensors.ts";
import { deltaChunkLen } from "../../src/ops/recurrent.ts";
import { DiskModelSource } from "../../src/platform/deno.ts";
import { prefixFolder } from "../../src/platform/prefix_folder.ts";
import { FIXTURES, readGolden } from "../util/fixtures.ts";

let gpu: Gpu | null = null;
afterAll(() => gpu?.destroy());

/** One request on a scheduler of its own; its cache is flushed to files (`flush`), then emptied. */
async function run(engine: Engine, opts: SchedulerOptions, prompt: number[], flush = false) {
  const s = new Scheduler(engine, opts);
  try {
    const r = await s.submit({ prompt, maxTokens: 8 }).result;
    if (flush) await s.flushPrefixCache();
    return { ids: r.tokenIds, cached: r.cachedTokens, loaded: s.prefixCache?.snapshot().tokensLoaded ?? 0 };
  } finally {
    await s.close();
    s.prefixCache?.clear();
    expect(engine.kv.usedPages).toBe(0);
  }
}

/** The page files of `dir` holding a state snapshot, and the byte span of it. */
async function stateFiles(dir: string): Promise<{ name: string; offset: number; bytes: number }[]> {
  const src = new DiskModelSource(dir);
  const out = [];
  try {
    for await (const f of Deno.readDir(dir)) {
      if (!f.name.endsWith(".safetensors")) continue;
      const t = (await readHeader(src, f.name)).tensors.get("state");
      if (t) out.push({ name: f.name, offset: t.offset, bytes: t.byteLength });
    }
  } finally {
    src.close();
  }
  return out;
}

/** Rewrites a page file without its `state` tensor (a valid file, checksum and all). */
async function dropState(dir: string, name: string): Promise<void> {
  const src = new DiskModelSource(dir);
  const h = await readHeader(src, name);
  const tensors = [];
  for (const t of h.tensors.values()) {
    if (t.name !== "state") {
      tensors.push({ name: t.name, dtype: t.dtype, shape: t.shape, data: await readTensorBytes(src, t) });
    }
  }
  src.close();
  const checksum = pageChecksum(tensors.map((t) => t.data));
  const parts = encodeSafetensors(tensors, { ...h.metadata, checksum });
  const out = new Uint8Array(parts.reduce((n, p) => n + p.byteLength, 0));
  parts.reduce((at, p) => (out.set(p, at), at + p.byteLength), 0);
  await Deno.writeFile(`${dir}/${name}`, out);
}

for (const name of ["qwen3_next", "lfm2", "gemma3_text"]) {
  describe(`${name}: prefix cache files with recurrent state`, () => {
    test("a new scheduler resumes from the files' snapshot; damaged, stateless files unused", async () => {
      gpu ??= await Gpu.create();
      const dir = `${FIXTURES}/${name}`;
      const engine = await Engine.load(new DiskModelSource(dir), {
        gpu,
        contextWindow: 512,
        maxBatch: 2,
        prefillChunk: 64,
        kvBudget: 16 << 20,
        warmup: false,
      });
      const root = await Deno.makeTempDir({ prefix: "flint_prefix_state_" });
      try {
        const d = engine.config.hybrid?.deltanet;
        const unit = d ? Math.max(16, deltaChunkLen(gpu.info, d.dk, d.dv)) : 16;
        const at = (n: number) => Math.floor((n - 1) / unit) * unit;
        const g = await readGolden(dir);
        const first = Array.from(
          { length: Math.max(g.inputIds.length, unit + 21) },
          (_, i) => g.inputIds[i % g.inputIds.length],
        );
        const off: SchedulerOptions = { prefixCacheBytes: 0 };
        const a = await run(engine, off, first);
        const followUp = [...first, ...a.ids, ...first.slice(3, unit + 20)];
        const b = await run(engine, off, followUp);
        // Two tokens past the boundary: its output depends on the restored state most.
        const c = at(first.length);
        const near = first.slice(0, c + 2);
        const n = await run(engine, off, near);

        const { folder, fingerprint } = await prefixFolder(root, dir, engine);
        const on = { prefixFolder: { folder, fingerprint, budgetBytes: 2 ** 30, idleMs: 3_600_000 } };
        expect(await run(engine, on, first, true)).toEqual({ ids: a.ids, cached: 0, loaded: 0 });
        const withState = await stateFiles(folder.where);
        expect(withState.length).toBe(1);
        const backup = await Deno.readFile(`${folder.where}/${withState[0].name}`);

        // Memory empty: the pages and the snapshot come from the files.
        expect(await run(engine, on, followUp)).toEqual({ ids: b.ids, cached: c, loaded: c });
        expect(await run(engine, on, near)).toEqual({ ids: n.ids, cached: c, loaded: c });

        // Without the state the file's pages are not a place to resume from (the file stays).
        await dropState(folder.where, withState[0].name);
        expect(await run(engine, on, followUp)).toEqual({ ids: b.ids, cached: 0, loaded: 0 });
        expect(await Deno.stat(`${folder.where}/${withState[0].name}`)).toBeTruthy();

        // Damaged state bytes fail the checksum: the file is deleted, the prompt prefilled whole.
        const bytes = backup.slice();
        const { offset, bytes: len } = withState[0];
        for (let i = offset + (len >> 1); i < offset + (len >> 1) + 64; i++) bytes[i] ^= 0x5a;
        await Deno.writeFile(`${folder.where}/${withState[0].name}`, bytes);
        expect(await run(engine, on, followUp)).toEqual({ ids: b.ids, cached: 0, loaded: 0 });
        expect(await stateFiles(folder.where)).toEqual([]);
        expect(gpu.takeErrors()).toEqual([]);
      } finally {
        engine.kv.destroy();
        await Deno.remove(root, { recursive: true });
      }
    });
  });
}
