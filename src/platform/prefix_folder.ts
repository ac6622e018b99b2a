/**
 * Deno-only: the prefix cache's folder of page files (engine/prefix_store.ts) and the model fingerprint
 * that names it, so a different model, quantization, KV cache type or page size never reads another's
 * pages.
 * @module
 */
import type { Engine } from "../engine/engine.ts";
import type { PageFolder } from "../engine/prefix_store.ts";
import { DiskModelSource } from "./deno.ts";

/** `$XDG_CACHE_HOME/flint/prefix`, else `~/.cache/flint/prefix`. */
export function defaultPrefixCacheDir(): string {
  const xdg = Deno.env.get("XDG_CACHE_HOME");
  const home = Deno.env.get("HOME") ?? Deno.env.get("USERPROFILE") ?? ".";
  return `${xdg || `${home}/.cache`}/flint/prefix`;
}

export class DiskPageFolder implements PageFolder {
  readonly source: DiskModelSource;
  constructor(readonly where: string) {
    Deno.mkdirSync(where, { recursive: true });
    this.source = new DiskModelSource(where);
  }

  async list(): Promise<{ name: string; size: number; mtime: number }[]> {
    const out = [];
    for await (const e of Deno.readDir(this.where)) {
      if (!e.isFile) continue;
      // A temporary file left by a crash mid-write.
      if (e.name.endsWith(".tmp")) {
        await Deno.remove(`${this.where}/${e.name}`).catch(() => {});
        continue;
      }
      if (!e.name.endsWith(".safetensors")) continue;
      const st = await Deno.stat(`${this.where}/${e.name}`);
      out.push({ name: e.name, size: st.size, mtime: st.mtime?.getTime() ?? 0 });
    }
    return out.sort((a, b) => a.mtime - b.mtime);
  }

  async write(name: string, parts: Uint8Array[]): Promise<void> {
    const tmp = `${this.where}/${name}.${crypto.randomUUID()}.tmp`;
    const f = await Deno.open(tmp, { write: true, create: true, truncate: true });
    try {
      for (const p of parts) {
        for (let off = 0; off < p.byteLength;) off += await f.write(p.subarray(off));
      }
    } finally {
      f.close();
    }
    this.source.close(); // a handle to an older file of this name must not be reused
    await Deno.rename(tmp, `${this.where}/${name}`);
  }

  release(): void {
    this.source.close();
  }

  async remove(name: string): Promise<void> {
    this.source.close();
    await Deno.remove(`${this.where}/${name}`);
  }
}

async function sha256Hex(bytes: Uint8Array): Promise<string> {
  const d = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes as Uint8Array<ArrayBuffer>));
  return Array.from(d, (b) => b.toString(16).padStart(2, "0")).join("");
}

/**
 * What the cached KV depends on: config.json, every safetensors file's header, size and a sample of its
 * bytes (hashing whole checkpoints would take longer than a prefill), the KV cache type, the activation
 * type and the page size. `weights` names weights that come from elsewhere (the benchmark's synthetic ones).
 */
export async function modelFingerprint(dir: string, engine: Engine, weights = "files"): Promise<string> {
  const parts: string[] = [
    "flint-prefix-1",
    `kv=${engine.kv.scales ? "q8" : "act"} f16=${engine.gpu.info.f16} page=${engine.kv.shape.pageSize}`,
    `weights=${weights}`,
    await Deno.readTextFile(`${dir}/config.json`),
  ];
  const src = new DiskModelSource(dir);
  try {
    const files = (await src.list()).filter((f) => f.endsWith(".safetensors"));
    for (const f of weights === "files" ? files : []) {
      const size = (await src.size(f)) ?? 0;
      const sample = Math.min(size, 1 << 16);
      const head = await src.read(f, 0, sample);
      const mid = await src.read(f, Math.floor((size - sample) / 2), sample);
      const tail = await src.read(f, size - sample, sample);
      parts.push(`${f} ${size} ${await sha256Hex(head)} ${await sha256Hex(mid)} ${await sha256Hex(tail)}`);
    }
  } finally {
    src.close();
  }
  return await sha256Hex(new TextEncoder().encode(parts.join("\n")));
}

/** The folder of this model's page files inside `root` (one subfolder per fingerprint). */
export async function prefixFolder(
  root: string,
  modelDir: string,
  engine: Engine,
  weights?: string,
): Promise<{ folder: DiskPageFolder; fingerprint: string }> {
  const fingerprint = await modelFingerprint(modelDir, engine, weights);
  return { folder: new DiskPageFolder(`${root}/${fingerprint.slice(0, 16)}`), fingerprint };
}
