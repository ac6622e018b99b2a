/**
 * Deno-only: prompt-cache files (as mlx-lm's `cache_prompt`). One page file of the prefix cache's second
 * tier (engine/prefix_store.ts) holding every full page of a prompt, plus the prompt's last tokens that
 * do not fill a page, so `generate --prompt-cache-file` answers questions about a document without reading
 * it again. The file names the model fingerprint; another model or KV format is refused.
 * @module
 */
import type { Engine } from "../engine/engine.ts";
import type { SchedulerOptions } from "../engine/generation.ts";
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
 * Prefills `ids` once and writes its KV pages to `out`. Throws ValidationError when the prompt does not
 * fill a page (nothing to cache).
 */
export async function savePromptCache(engine: Engine, modelDir: string, ids: number[], out: string) {
  const ps = engine.kv.shape.pageSize;
  if (engine.recurrent || engine.kv.ring) {
    // A prompt-cache file holds pool pages only (no recurrent state or KV rings).
    throw new ValidationError(
      `${engine.info.name} keeps per-sequence state a cache file cannot hold`,
      "prompt",
    );
  }
  if (ids.length <= ps) {
    throw new ValidationError(`the prompt has ${ids.length} tokens; a cache needs more than ${ps}`, "prompt");
  }
  const tmp = await Deno.makeTempDir({ prefix: "flint_cache_prompt_" });
  try {
    const folder = new DiskPageFolder(tmp);
    const fingerprint = await modelFingerprint(modelDir, engine);
    const sched = new Scheduler(engine, {
      prefixFolder: { folder, fingerprint, budgetBytes: Infinity, idleMs: 3_600_000 },
    });
    sched.prefixStore!.runBytes = Infinity;
    const r = await sched.submit({ prompt: ids, maxTokens: 1 }).result;
    if (r.error) throw r.error;
    await sched.flushPrefixCache();
    await sched.close();
    const [file] = sched.prefixStore!.files;
    const src = new DiskModelSource(tmp);
    const h = await readHeader(src, file.name);
    const pages = h.metadata.chains.split(",").length;
    const tensors = [];
    for (const t of h.tensors.values()) {
      tensors.push({ name: t.name, dtype: t.dtype, shape: t.shape, data: await readTensorBytes(src, t) });
    }
    src.close();
    const parts = encodeSafetensors(tensors, {
      ...h.metadata,
      prompt_tail: ids.slice(pages * ps).join(","),
      model: engine.info.name,
    });
    const [outDir, outName] = split(out);
    await new DiskPageFolder(outDir).write(outName, parts);
    return {
      tokens: ids.length,
      cachedTokens: pages * ps,
      bytes: parts.reduce((a, p) => a + p.byteLength, 0),
    };
  } finally {
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
