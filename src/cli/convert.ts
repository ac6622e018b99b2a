/**
 * `npm run convert -- --hf DIR --out DIR --bits 4|8 --group-size 32|64|128 [--force] [--max-shard-bytes N]`:
 * quantize a Hugging Face checkpoint into the mlx-lm layout (the work is in src/loader/convert.ts).
 * @module
 */
import { ValidationError } from "../errors.ts";
import { convert, type ConvertOptions, GiB } from "../loader/convert.ts";

export { convert, type ConvertSummary, type Quantizer } from "../loader/convert.ts";

const FLAGS = ["hf", "out", "bits", "group-size", "max-shard-bytes"];

/**
 * Parses the CLI flags (`--hf DIR --out DIR [--bits 4] [--group-size 64] [--force] [--max-shard-bytes N]`).
 */
export function parseCli(args: string[]): ConvertOptions {
  const values: Record<string, string> = {};
  let force = false;
  for (let i = 0; i < args.length; i++) {
    const m = /^--([a-z-]+)(?:=(.*))?$/.exec(args[i]);
    if (m?.[1] === "force" && m[2] === undefined) {
      force = true;
      continue;
    }
    const known = `--${[...FLAGS, "force"].join(", --")}`;
    if (!m || !FLAGS.includes(m[1])) {
      throw new ValidationError(`unknown argument "${args[i]}" (flags: ${known})`);
    }
    const v = m[2] ?? args[++i];
    if (v === undefined) throw new ValidationError(`--${m[1]} needs a value`, m[1]);
    values[m[1]] = v;
  }
  const int = (flag: string, fallback: number): number => {
    const v = values[flag];
    if (v === undefined) return fallback;
    if (!/^\d+$/.test(v)) throw new ValidationError(`--${flag}: "${v}" is not a positive integer`, flag);
    return Number(v);
  };
  if (!values.hf) {
    throw new ValidationError("--hf DIR (the Hugging Face checkpoint folder) is required", "hf");
  }
  if (!values.out) throw new ValidationError("--out DIR (the folder to write) is required", "out");
  // Defaults are mlx-lm's (4 bits, group 64, 5 GiB files).
  const [bits, groupSize, maxShardBytes] = [
    int("bits", 4),
    int("group-size", 64),
    int("max-shard-bytes", 5 * GiB),
  ];
  return { hf: values.hf, out: values.out, bits, groupSize, force, maxShardBytes };
}

const USAGE = `usage: npm run convert -- --hf DIR --out DIR [--bits 4|8] [--group-size 32|64|128] [--force]
       [--max-shard-bytes N]
Quantizes a Hugging Face checkpoint (bf16/f16/f32 safetensors) into the mlx-lm layout: --bits 4, group 64
and 5 GiB files by default, as mlx-lm; --force overwrites a non-empty --out. Fused expert stacks become
switch_mlp stacks; multimodal wrappers (Qwen3.5 / 3.6) keep their text model only (vision tower dropped).`;

if (import.meta.main) {
  if (Deno.args.includes("--help") || Deno.args.includes("-h")) {
    console.log(USAGE);
    Deno.exit(0);
  }
  try {
    await convert(parseCli(Deno.args));
  } catch (e) {
    console.error(`convert: ${(e as Error).message}`);
    Deno.exit(1);
  }
}
