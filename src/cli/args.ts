/**
 * Minimal flag parsing for the CLIs (the Deno std library is not installable here): `--name value`,
 * `--name=value`, boolean `--flag`; unknown flags and bad numbers are errors that name the flag.
 * @module
 */
import type { KvCacheType } from "../engine/kv_pool.ts";
import { FlintError, ValidationError } from "../errors.ts";
import type { WebGpuChoice } from "../platform/mod.ts";

export type FlagSpec = Record<string, "string" | "number" | "boolean">;
export type Flags<S extends FlagSpec> = {
  [K in keyof S]?: S[K] extends "number" ? number : S[K] extends "boolean" ? boolean : string;
};

export function parseFlags<S extends FlagSpec>(argv: string[], spec: S): Flags<S> & { _: string[] } {
  const out: Record<string, unknown> = { _: [] as string[] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (!a.startsWith("--")) {
      (out._ as string[]).push(a);
      continue;
    }
    let [name, value] = a.slice(2).split(/=(.*)/s, 2) as [string, string | undefined];
    const kind = spec[name];
    if (!kind) {
      throw new ValidationError(
        `unknown flag --${name} (known: ${Object.keys(spec).map((k) => `--${k}`).join(", ")})`,
        name,
      );
    }
    if (kind === "boolean") {
      out[name] = value === undefined ? true : value !== "false";
      continue;
    }
    if (value === undefined) {
      if (i + 1 >= argv.length) throw new ValidationError(`--${name} needs a value`, name);
      value = argv[++i];
    }
    if (kind === "number") {
      const n = Number(value);
      if (!Number.isFinite(n)) throw new ValidationError(`--${name} expects a number, got "${value}"`, name);
      out[name] = n;
    } else out[name] = value;
  }
  return out as Flags<S> & { _: string[] };
}

/** `--kv-cache act|q8` (the KV cache element type; absent: the engine's default, act). */
export function kvCacheFlag(v: string | undefined): KvCacheType | undefined {
  if (v === undefined || v === "act" || v === "q8") return v;
  throw new ValidationError(
    `--kv-cache ${v}: expected act (f16 values) or q8 (8-bit codes + scales)`,
    "kv-cache",
  );
}

/** `--webgpu deno|dawn|auto` (absent: auto). */
export function webgpuFlag(v: string | undefined): WebGpuChoice {
  if (v === undefined || v === "deno" || v === "dawn" || v === "auto") return v ?? "auto";
  throw new ValidationError(
    `--webgpu ${v}: expected deno (Deno's WebGPU), dawn (npm webgpu's dawn.node) or auto (the default: Dawn ` +
      "where it offers matrix units)",
    "webgpu",
  );
}

/**
 * Runs a CLI's `main` and exits with its status; a FlintError is printed as `error: <message>` (which names
 * the file and field) and exits 2 for bad arguments, 1 otherwise. Anything else is a bug and is rethrown.
 */
export async function runCli(main: (argv: string[]) => Promise<number>): Promise<void> {
  try {
    Deno.exit(await main(Deno.args));
  } catch (e) {
    if (e instanceof FlintError) {
      console.error(`error: ${e.message}`);
      Deno.exit(e instanceof ValidationError ? 2 : 1);
    }
    throw e;
  }
}
