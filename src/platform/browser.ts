/**
 * Browser-only pieces: model folders as `File`/`Blob` objects (directory picker, `<input webkitdirectory>`,
 * drag and drop), the check that a folder has what the playground needs, and the IndexedDB model cache
 * (idb-keyval) with persistent storage, so a reload does not ask for the folder again.
 * Imported by web/, never by the server or the CLI.
 * @module
 */
import { createStore, del, get, keys, set, type UseStore } from "idb-keyval";
import { LoaderError } from "../errors.ts";
import type { ModelSource } from "./mod.ts";

/** A model folder held as blobs: picked files, or a copy kept in IndexedDB. */
export class BlobModelSource implements ModelSource {
  readonly #files: Map<string, Blob>;
  constructor(readonly name: string, files: Map<string, Blob> | Record<string, Blob>) {
    this.#files = files instanceof Map ? files : new Map(Object.entries(files));
  }

  list(): Promise<string[]> {
    return Promise.resolve([...this.#files.keys()].sort());
  }

  size(file: string): Promise<number | null> {
    return Promise.resolve(this.#files.get(file)?.size ?? null);
  }

  async read(file: string, offset: number, length: number, into?: Uint8Array): Promise<Uint8Array> {
    const b = this.#blob(file);
    if (offset + length > b.size) {
      throw new LoaderError(`${this.name}/${file}`, null, `unexpected end of file at byte ${b.size}`);
    }
    const bytes = new Uint8Array(await b.slice(offset, offset + length).arrayBuffer());
    if (!into) return bytes;
    into.set(bytes);
    return into.subarray(0, length);
  }

  readText(file: string): Promise<string> {
    return this.#blob(file).text();
  }

  /** Total bytes of all files. */
  get bytes(): number {
    let n = 0;
    for (const b of this.#files.values()) n += b.size;
    return n;
  }

  /** The blobs, by file name (what the cache stores). */
  get files(): ReadonlyMap<string, Blob> {
    return this.#files;
  }

  #blob(file: string): Blob {
    const b = this.#files.get(file);
    if (!b) throw new LoaderError(`${this.name}/${file}`, null, "file not found");
    return b;
  }
}

/** Files a model folder needs to be worth caching; everything else (READMEs, images) is left out. */
const MODEL_FILE = /\.(json|safetensors|jinja|txt|model)$/i;

/**
 * A model source from an `<input webkitdirectory>` FileList or a drop. Only files directly in the picked
 * folder count (a checkpoint is flat); the folder name comes from `webkitRelativePath`.
 */
export function sourceFromFiles(list: Iterable<File>, fallbackName = "model"): BlobModelSource {
  const files = new Map<string, Blob>();
  let folder = "";
  for (const f of list) {
    const parts = (f.webkitRelativePath || f.name).split("/");
    if (parts.length > 2) continue; // nested folder
    if (parts.length === 2) folder ||= parts[0];
    if (MODEL_FILE.test(f.name)) files.set(f.name, f);
  }
  if (!files.size) {
    throw new LoaderError(
      folder || fallbackName,
      null,
      "no model files in this folder (config.json, *.safetensors, tokenizer.json)",
    );
  }
  return new BlobModelSource(folder || fallbackName, files);
}

/** True where the File System Access directory picker exists (Chrome, Edge); others use webkitdirectory. */
export function hasDirectoryPicker(): boolean {
  return typeof (globalThis as any).showDirectoryPicker === "function";
}

/** Opens the directory picker; null when the user cancels. */
export async function pickModelFolder(): Promise<BlobModelSource | null> {
  let dir: any;
  try {
    dir = await (globalThis as any).showDirectoryPicker({ id: "flint-model", mode: "read" });
  } catch (e) {
    if ((e as DOMException).name === "AbortError") return null;
    throw e;
  }
  const files = new Map<string, Blob>();
  for await (const [name, handle] of dir.entries()) {
    if (handle.kind === "file" && MODEL_FILE.test(name)) files.set(name, await handle.getFile());
  }
  if (!files.size) {
    throw new LoaderError(
      dir.name,
      null,
      "no model files in this folder (config.json, *.safetensors, tokenizer.json)",
    );
  }
  return new BlobModelSource(dir.name, files);
}

/** A folder dropped on the page (Chrome, Edge, Firefox, Safari all have `webkitGetAsEntry`); null if none. */
export async function sourceFromDrop(dt: DataTransfer): Promise<BlobModelSource | null> {
  const entry = [...dt.items].map((i) => (i as any).webkitGetAsEntry?.()).find((e) => e?.isDirectory);
  if (!entry) return null;
  const reader = entry.createReader();
  const all: any[] = [];
  // readEntries returns batches (100 in Chrome) until an empty one.
  for (;;) {
    const batch: any[] = await new Promise((res, rej) => reader.readEntries(res, rej));
    if (!batch.length) break;
    all.push(...batch);
  }
  const files = new Map<string, Blob>();
  for (const e of all) {
    if (e.isFile && MODEL_FILE.test(e.name)) {
      files.set(
        e.name,
        await new Promise<File>((res, rej) => e.file(res, rej)),
      );
    }
  }
  if (!files.size) {
    throw new LoaderError(
      entry.name,
      null,
      "no model files in this folder (config.json, *.safetensors, tokenizer.json)",
    );
  }
  return new BlobModelSource(entry.name, files);
}

/**
 * Checks, before any weight is read, that a folder has what chatting needs: config.json, tokenizer.json and
 * its safetensors (every shard its index names). Throws a LoaderError naming the first missing file and
 * listing the others, so a folder is refused at load time rather than at the first message.
 */
export async function checkModelFolder(src: ModelSource): Promise<void> {
  const files = new Set(await src.list());
  const missing: string[] = [];
  let why = "";
  if (!files.has("config.json")) missing.push("config.json");
  if (!files.has("tokenizer.json")) {
    missing.push("tokenizer.json");
    if (missing.length === 1) why = " (the playground needs the tokenizer to turn messages into tokens)";
  }
  if (files.has("model.safetensors.index.json")) {
    missing.push(...(await indexShards(src)).filter((f) => !files.has(f)));
  } else if (![...files].some((f) => f.endsWith(".safetensors"))) {
    missing.push("*.safetensors");
  }
  if (!missing.length) return;
  const others = missing.length > 1 ? `; also missing: ${missing.slice(1).join(", ")}` : "";
  throw new LoaderError(`${src.name}/${missing[0]}`, null, `file not found${why}${others}`);
}

/** Shard names of model.safetensors.index.json; an unreadable index is left for the loader to report. */
async function indexShards(src: ModelSource): Promise<string[]> {
  try {
    const map = JSON.parse(await src.readText("model.safetensors.index.json"))?.weight_map ?? {};
    return [...new Set(Object.values(map).filter((v): v is string => typeof v === "string"))].sort();
  } catch {
    return [];
  }
}

// ---- IndexedDB cache -------------------------------------------------------------------------------------

/** What the cache lists: one entry per saved model folder. */
export interface CachedModel {
  name: string;
  bytes: number;
  files: number;
  savedAt: number;
}

interface CacheRecord extends CachedModel {
  blobs: Record<string, Blob>;
}

let store: UseStore | null = null;
const db = () => (store ??= createStore("flint", "models"));

/**
 * Saves a model folder. Browsers copy stored blobs into their own storage, so the cached model survives the
 * original files moving. Asks for persistent storage first so the browser does not evict gigabytes silently;
 * returns whether it was granted (false where the browser refused or has no Storage API).
 */
export async function cacheModel(src: BlobModelSource): Promise<{ persisted: boolean }> {
  const persisted = await requestPersistentStorage();
  const blobs: Record<string, Blob> = {};
  for (const [n, b] of src.files) blobs[n] = b;
  const rec: CacheRecord = {
    name: src.name,
    bytes: src.bytes,
    files: src.files.size,
    savedAt: Date.now(),
    blobs,
  };
  try {
    await set(src.name, rec, db());
  } catch (e) {
    const quota = await navigator.storage?.estimate?.().catch(() => null);
    const free = quota?.quota && quota.usage !== undefined
      ? `; ${formatBytes(quota.quota - quota.usage)} free`
      : "";
    throw new LoaderError(
      src.name,
      null,
      `could not cache the model in this browser (${(e as Error).message}${free})`,
    );
  }
  return { persisted };
}

/** `navigator.storage.persist()`: true when this origin's storage will not be evicted under pressure. */
export async function requestPersistentStorage(): Promise<boolean> {
  const storage = globalThis.navigator?.storage;
  if (!storage?.persist) return false;
  return await storage.persist().catch(() => false);
}

/** Whether storage is persistent, and this origin's usage and quota in bytes (null where unknown). */
export interface StorageStatus {
  persisted: boolean | null;
  usage: number | null;
  quota: number | null;
}

export async function storageStatus(): Promise<StorageStatus> {
  const storage = globalThis.navigator?.storage;
  const persisted = storage?.persisted ? await storage.persisted().catch(() => null) : null;
  const est = storage?.estimate ? await storage.estimate().catch(() => null) : null;
  return { persisted, usage: est?.usage ?? null, quota: est?.quota ?? null };
}

/** Saved models, largest first. */
export async function listCachedModels(): Promise<CachedModel[]> {
  const out: CachedModel[] = [];
  for (const k of await keys(db())) {
    const r = await get<CacheRecord>(k, db());
    if (r) out.push({ name: r.name, bytes: r.bytes, files: r.files, savedAt: r.savedAt });
  }
  return out.sort((a, b) => b.savedAt - a.savedAt);
}

/** A saved model as a source, or null when it is not (or no longer) cached. */
export async function loadCachedModel(name: string): Promise<BlobModelSource | null> {
  const r = await get<CacheRecord>(name, db());
  return r ? new BlobModelSource(r.name, r.blobs) : null;
}

export async function deleteCachedModel(name: string): Promise<void> {
  await del(name, db());
}

/** "10.7 MB", "1.2 GB". */
export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  const u = ["KB", "MB", "GB", "TB"];
  let i = -1;
  do {
    n /= 1000;
    i++;
  } while (n >= 1000 && i < u.length - 1);
  return `${n.toFixed(n < 10 ? 1 : 0)} ${u[i]}`;
}
