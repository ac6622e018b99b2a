/**
 * Deno-only pieces: model folders on disk. Imported by the CLI, the server and tests, never by web/.
 * @module
 */
import { LoaderError } from "../errors.ts";
import type { ModelSource } from "./mod.ts";

/** A model folder on the local disk. Files are opened per read so nothing stays locked. */
export class DiskModelSource implements ModelSource {
  readonly name: string;
  #files = new Map<string, Deno.FsFile>();
  constructor(readonly dir: string) {
    this.name = dir;
  }

  async list(): Promise<string[]> {
    const out: string[] = [];
    try {
      for await (const e of Deno.readDir(this.dir)) if (e.isFile || e.isSymlink) out.push(e.name);
    } catch (e) {
      throw new LoaderError(this.dir, null, `cannot read model folder (${(e as Error).message})`);
    }
    return out.sort();
  }

  async size(file: string): Promise<number | null> {
    try {
      return (await Deno.stat(`${this.dir}/${file}`)).size;
    } catch {
      return null;
    }
  }

  async read(file: string, offset: number, length: number, into?: Uint8Array): Promise<Uint8Array> {
    let f = this.#files.get(file);
    if (!f) {
      f = await Deno.open(`${this.dir}/${file}`, { read: true });
      this.#files.set(file, f);
    }
    const buf = into ?? new Uint8Array(length);
    await f.seek(offset, Deno.SeekMode.Start);
    let done = 0;
    while (done < length) {
      const n = await f.read(buf.subarray(done, length));
      if (n === null) {
        throw new LoaderError(`${this.dir}/${file}`, null, `unexpected end of file at byte ${offset + done}`);
      }
      done += n;
    }
    return buf.subarray(0, length);
  }

  async readText(file: string): Promise<string> {
    return await Deno.readTextFile(`${this.dir}/${file}`);
  }

  /** Closes file handles kept open between reads. */
  close(): void {
    for (const f of this.#files.values()) f.close();
    this.#files.clear();
  }
}

/** The bundled default model, relative to the repository root. */
export const DEFAULT_MODEL_DIR: string =
  new URL("../../models/flint-coder-19m-mlx-4bit", import.meta.url).pathname;
