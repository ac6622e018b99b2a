/**
 * Deno-only: prompt-cache files (as mlx-lm's `cache_prompt`). One page file of the prefix cache's second
 * tier (engine/prefix_store.ts) holding the full pages of a prompt (a stateful model's up to its state
 * snapshot, which the file holds too), plus the prompt's tokens after them, so `generate
 * --prompt-cache-file` answers questions about a document without reading it again. The file names the
 * model fingerprint; another model or KV format is refused.
 * @module
 */
import type { Engine } from "../engine/engine.ts";
import type { SchedulerOptions } from "../engine/generation.ts";
import { reusablePages } from "../engine/prefix_cache.ts";
import { readsPageFormat } from "../engine/prefix_file.ts";
import { Scheduler } from "../engine/scheduler.ts";
import { LoaderError, ValidationError } from "../errors.ts";
import { encodeSafetensors, readHeader, readTensorBytes } from "../loader/safetensors.ts";
import { DiskModelSource } from "./deno.ts";
import { DiskPageFolder, modelFingerprint } from "./prefix_folder.ts";

function split(path: string): [string, string] {
  const i = path.lastIndexOf("/");
  return i < 0 ? [".", path] : [path.slice(0, i) || "/", path.slice(i + 1)];
}

/**
 * Prefills `ids` once and writes its KV pages to `out`. A model with per-sequence state (recurrent layers,
 * sliding-window KV rings) caches the prompt up to its state snapshot (prefix_state.ts), which the file
 * holds. Throws ValidationError when the prompt is too short to cache anything.
 */
export async function savePromptCache(engine: Engine, modelDir: string, ids: number[], out: string) {
  const ps = engine.kv.shape.pageSize;
  const tmp = await Deno.makeTempDir({ prefix: "flint_cache_prompt_" });
  let sched: Scheduler | null = null;
  try {
    const folder = new DiskPageFolder(tmp);
    const fingerprint = await modelFingerprint(modelDir, engine);
    sched = new Scheduler(engine, {
      prefixFolder: { folder, fingerprint, budgetBytes: Infinity, idleMs: 3_600_000 },
    });
    const store = sched.prefixStore!;
    store.runBytes = Infinity;
    const states = store.states;
    // A stateful model resumes only where the prefill saved a snapshot of its state.
    const cachedAt = (n: number) => states ? states.boundary(n, ps) : reusablePages(n, ps) * ps;
    if (!cachedAt(ids.length)) {
      let need = ids.length + 1;
      while (!cachedAt(need)) need++;
      const why = states
        ? ` (${engine.info.name} resumes only at a snapshot of its state, every ${cachedAt(need)} tokens)`
        : "";
      throw new ValidationError(
        `the prompt has ${ids.length} tokens; a cache needs at least ${need}${why}`,
        "prompt",
      );
    }
    const r = await sched.submit({ prompt: ids, maxTokens: 1 }).result;
    if (r.error) throw r.error;
    await sched.flushPrefixCache();
    const src = new DiskModelSource(tmp);
    try {
      // The run from the prompt's start (a stateful model's ends at its snapshot; later pages are left out).
      const file = store.files.find((f) => f.start === 0);
      const h = file && await readHeader(src, file.name);
      const cachedTokens = file ? file.pages * ps : 0;
      if (!h || (states && (!h.tensors.has("state") || cachedTokens !== cachedAt(ids.length)))) {
        throw new Error(`${engine.info.name}: the prefill kept no state snapshot to cache the prompt at`);
      }
      const tensors = [];
      for (const t of h.tensors.values()) {
        tensors.push({ name: t.name, dtype: t.dtype, shape: t.shape, data: await readTensorBytes(src, t) });
      }
      const parts = encodeSafetensors(tensors, {
        ...h.metadata,
        prompt_tail: ids.slice(cachedTokens).join(","),
        model: engine.info.name,
      });
      const [outDir, outName] = split(out);
      await new DiskPageFolder(outDir).write(outName, parts);
      return { tokens: ids.length, cachedTokens, bytes: parts.reduce((a, p) => a + p.byteLength, 0) };
    } finally {
      src.close();
    }
  } finally {
    await sched?.close();
    // The engine's pool pages go back (the caller may serve with it afterwards).
    sched?.prefixCache?.clear();
    await Deno.remove(tmp, { recursive: true });
  }
}

/**
 * Opens a prompt-cache file for `engine`: the cached prompt's token ids, and the scheduler option that
 * reads its pages. Errors name the file: not a prompt cache, or made for another model or KV format.
 */
export async function openPromptCache(
  engine: Engine,
  modelDir: string,
  path: string,
): Promise<{ ids: number[]; prefixFolder: NonNullable<SchedulerOptions["prefixFolder"]> }> {
  const [dir, name] = split(path);
  const src = new DiskModelSource(dir);
  const bad = (why: string) =>
    new ValidationError(`--prompt-cache-file ${path}: ${why}`, "prompt-cache-file");
  try {
    if ((await src.size(name)) === null) throw bad("file not found");
    let h;
    try {
      h = await readHeader(src, name);
    } catch (e) {
      throw bad((e instanceof LoaderError ? e.message : String(e)) + " (not a prompt-cache file?)");
    }
    const m = h.metadata;
    const tokens = h.tensors.get("tokens");
    if (!readsPageFormat(m.format) || !tokens || m.prompt_tail === undefined) {
      throw bad("not a Flint prompt-cache file (make one with `deno task cache-prompt`)");
    }
    const fingerprint = await modelFingerprint(modelDir, engine);
    if (m.fingerprint !== fingerprint) {
      throw bad(
        `made for another model or KV cache format (${m.model ?? "unknown"}; this is ${engine.info.name}, ` +
          `KV cache ${engine.kv.scales ? "q8" : "act"}, page size ${engine.kv.shape.pageSize})`,
      );
    }
    const ids = [...new Uint32Array((await readTensorBytes(src, tokens)).slice().buffer)];
    if (m.prompt_tail) ids.push(...m.prompt_tail.split(",").map(Number));
    const folder = new SingleFile(dir, name);
    return { ids, prefixFolder: { folder, fingerprint, budgetBytes: Infinity } };
  } finally {
    src.close();
  }
}

/** A folder view holding just one file, read-only (the user's prompt-cache file is never deleted). */
class SingleFile {
  readonly readOnly = true;
  readonly source: DiskModelSource;
  readonly where: string;
  constructor(dir: string, readonly name: string) {
    this.where = dir;
    this.source = new DiskModelSource(dir);
  }
  async list() {
    const st = await Deno.stat(`${this.where}/${this.name}`);
    return [{ name: this.name, size: st.size, mtime: st.mtime?.getTime() ?? 0 }];
  }
  release(): void {
    this.source.close();
  }
  write(): Promise<void> {
    return Promise.resolve();
  }
  remove(): Promise<void> {
    return Promise.resolve();
  }
}
