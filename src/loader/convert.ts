/**
 * Converting a Hugging Face safetensors checkpoint to an
 * MLX affine-quantized one in mlx-lm's layout (`P.weight` U32, `P.scales`/`P.biases` in the model dtype,
 * `{"format":"mlx"}` metadata, `quantization` + `quantization_config` in config.json).
 *
 * Streams: the output header is planned from the input headers alone (convert_plan.ts: names, drops, fused
 * expert stacks), then each file is written tensor by tensor; a quantized tensor is read in row chunks, and
 * only its own (small) outputs wait in memory until their turn in the name-sorted file order.
 * @module
 */
import { LoaderError, ValidationError } from "../errors.ts";
import { DiskModelSource } from "../platform/deno.ts";
import { DTYPE_BYTES, f32ToBf16, f32ToF16, readHeader, readTensorIndex } from "./safetensors.ts";
import { type TensorEntry, toFloat32 } from "./safetensors.ts";
import { AFFINE_BITS, AFFINE_GROUP_SIZES, type AffineQuantized, quantizeAffine } from "./quantize.ts";
import {
  type FloatDType,
  type Job,
  jobRows,
  jobSource,
  type Planned,
  planTensors,
  readRows,
} from "./convert_plan.ts";
import { textConfig } from "./nested.ts";

export type { FloatDType } from "./convert_plan.ts";

/** Swappable quantizer (tests use it to reproduce a reference checkpoint made with other rounding). */
export type Quantizer = (
  w: Float32Array,
  rows: number,
  cols: number,
  bits: number,
  groupSize: number,
  dtype: FloatDType,
) => AffineQuantized;

/** What `convert` needs; the CLI flags map one to one. */
export interface ConvertOptions {
  /** Input folder: config.json plus model.safetensors or shards with model.safetensors.index.json. */
  hf: string;
  /** Output folder; must be missing or empty unless `force`. */
  out: string;
  bits: number;
  groupSize: number;
  /** Write into a non-empty output folder (old model files there are removed first). */
  force?: boolean;
  /** Largest output file before sharding; mlx-lm's default is 5 GiB. */
  maxShardBytes?: number;
  /** Progress lines; stderr by default. */
  log?: (line: string) => void;
  /** Defaults to MLX's quantizer, `quantizeAffine`. */
  quantizer?: Quantizer;
}

/** What was written. */
export interface ConvertSummary {
  quantized: number;
  copied: number;
  /**
   * Input tensors mlx-lm would drop: a tied `lm_head.weight`, `rotary_emb.inv_freq`, MTP heads (`mtp.*`) and
   * a multimodal wrapper's vision tower (Flint serves text only).
   */
  dropped: string[];
  /** Tensor data bytes read and written (headers not counted). */
  bytesIn: number;
  bytesOut: number;
  /** Bits per quantized weight, scales and biases included (e.g. 4.5 for 4-bit, group 64, bf16). */
  bitsPerWeight: number;
  /** Output files, relative to `out`. */
  files: string[];
}

export const GiB = 1024 ** 3;
const CHUNK_BYTES = 64 * 1024 * 1024;
// Besides the weights and config.json, the files mlx-lm's output folder carries over (when present).
const EXTRA_FILES =
  `tokenizer.json tokenizer_config.json generation_config.json chat_template.jinja chat_template.json
  special_tokens_map.json tokenizer.model vocab.json merges.txt added_tokens.json`.split(/\s+/);
const FLOAT_DTYPES: Record<string, FloatDType> = { bfloat16: "BF16", float16: "F16", float32: "F32" };

/** Converts one checkpoint; throws LoaderError/ValidationError naming the file and field at fault. */
export async function convert(opts: ConvertOptions): Promise<ConvertSummary> {
  const log = opts.log ?? ((line: string) => console.error(line));
  const { bits, groupSize, hf, out } = opts;
  const bad = (flag: string, v: number, ok: string) =>
    new ValidationError(`--${flag}: ${v} is not supported; ${ok}`, flag);
  if (!AFFINE_BITS.includes(bits)) throw bad("bits", bits, `MLX affine takes ${AFFINE_BITS.join(", ")}`);
  if (!AFFINE_GROUP_SIZES.includes(groupSize)) {
    throw bad("group-size", groupSize, `use ${AFFINE_GROUP_SIZES.join(", ")}`);
  }
  const maxShard = opts.maxShardBytes ?? 5 * GiB;
  if (!(maxShard > 0)) throw bad("max-shard-bytes", maxShard, "give a positive byte count");

  const source = new DiskModelSource(hf);
  try {
    const files = await source.list();
    const config = await readConfig(source, files);
    const tensors = await readInputTensors(source, files);
    await prepareOut(hf, out, opts.force ?? false);
    const dtype = FLOAT_DTYPES[config.torch_dtype ?? textConfig(config)?.dtype];
    const { plan, dropped, vision, skipped } = planTensors(tensors, config, { bits, groupSize, dtype, hf });
    if (vision) log(`dropping ${vision} vision tower tensors: Flint serves the text model only`);
    const shards = splitShards(plan, maxShard);
    const names = shards.length === 1
      ? ["model.safetensors"]
      : shards.map((_, i) => `model-${pad5(i + 1)}-of-${pad5(shards.length)}.safetensors`);

    const quantizer = opts.quantizer ?? ((w, r, c, b, g) => quantizeAffine(w, r, c, b, g));
    await writeShards(source, out, shards, names, bits, groupSize, quantizer, log);
    if (shards.length > 1) {
      // Shards hold consecutive runs of the name-sorted plan, so this map is already sorted as mlx-lm's.
      const weightMap = Object.fromEntries(shards.flatMap((sh, i) => sh.map((t) => [t.name, names[i]])));
      const metadata = { total_size: plan.reduce((a, t) => a + t.byteLength, 0) };
      const index = JSON.stringify({ metadata, weight_map: weightMap }, null, 4);
      await Deno.writeTextFile(`${out}/model.safetensors.index.json`, index);
    }

    const quantization = { group_size: groupSize, bits, mode: "affine" };
    const outConfig = { ...config, quantization, quantization_config: { ...quantization } };
    await Deno.writeTextFile(`${out}/config.json`, JSON.stringify(outConfig, null, 2));
    const extras = EXTRA_FILES.filter((f) => files.includes(f));
    for (const f of extras) await Deno.copyFile(`${hf}/${f}`, `${out}/${f}`);

    const jobs = [...new Set(plan.map((t) => t.job))];
    const quantJobs = jobs.filter((j) => j.kind === "quant");
    const qElems = quantJobs.reduce((a, j) => a + jobRows(j) * j.cols, 0);
    const qBytes = plan.filter((t) => t.job.kind === "quant").reduce((a, t) => a + t.byteLength, 0);
    const summary: ConvertSummary = {
      quantized: quantJobs.length,
      copied: jobs.length - quantJobs.length,
      dropped,
      bytesIn: [...new Set(jobs.map(jobSource))].reduce((a, t) => a + t.byteLength, 0),
      bytesOut: plan.reduce((a, t) => a + t.byteLength, 0),
      bitsPerWeight: qElems ? (8 * qBytes) / qElems : 0,
      files: [
        ...names,
        ...(shards.length > 1 ? ["model.safetensors.index.json"] : []),
        "config.json",
        ...extras,
      ],
    };
    const bpw = summary.bitsPerWeight.toFixed(3);
    log(
      `done: ${summary.quantized} tensors quantized (${bits}-bit, group ${groupSize}), ` +
        `${summary.copied} copied` +
        (dropped.length ? `, ${dropped.length} dropped` : "") +
        (vision ? ` (${vision} of them the vision tower's)` : "") +
        (skipped ? ` (${skipped} weights left unquantized: last dim not a multiple of ${groupSize})` : "") +
        `; ${mb(summary.bytesIn)} -> ${mb(summary.bytesOut)}; ${bpw} bits per quantized weight; ` +
        `wrote ${summary.files.join(", ")} to ${out}`,
    );
    return summary;
  } finally {
    source.close();
  }
}

/** Writes each file: the header planned up front, then tensors in name order. */
async function writeShards(
  source: DiskModelSource,
  out: string,
  shards: Planned[][],
  names: string[],
  bits: number,
  groupSize: number,
  quantizer: Quantizer,
  log: (line: string) => void,
): Promise<void> {
  // A quantized tensor yields .biases, .scales and .weight at once; each waits here until its turn.
  const pending = new Map<string, Uint8Array>();
  const total = shards.flat().filter((t) => t.name.endsWith(".weight") && t.job.kind === "quant").length;
  let done = 0;
  for (let s = 0; s < shards.length; s++) {
    const file = await Deno.open(`${out}/${names[s]}`, { write: true, create: true, truncate: true });
    try {
      await writeAll(file, safetensorsHeader(shards[s], { format: "mlx" }));
      for (const t of shards[s]) {
        const job = t.job;
        if (job.kind === "copy") {
          await copyTensor(source, job.src, file);
          continue;
        }
        if (job.kind === "float") {
          pending.set(t.name, await restack(source, job));
        } else if (!pending.has(t.name)) {
          const parts = await quantizeTensor(source, job, bits, groupSize, quantizer);
          for (const [k, v] of parts) pending.set(k, v);
          const from = job.from.src.name === `${job.prefix}.weight` ? "" : ` (from ${job.from.src.name})`;
          log(`quantized ${job.prefix}.weight${from} [${[...job.lead, job.cols]}] (${++done}/${total})`);
        }
        const bytes = pending.get(t.name)!;
        if (bytes.byteLength !== t.byteLength) {
          throw new Error(`${t.name}: ${bytes.byteLength} bytes, planned ${t.byteLength}`);
        }
        await writeAll(file, bytes);
        pending.delete(t.name);
      }
    } finally {
      file.close();
    }
  }
}

async function readConfig(source: DiskModelSource, files: string[]): Promise<Record<string, any>> {
  const where = `${source.name}/config.json`;
  if (!files.includes("config.json")) {
    throw new LoaderError(where, null, "file not found (the output needs it)");
  }
  let config: any;
  try {
    config = JSON.parse(await source.readText("config.json"));
  } catch (e) {
    throw new LoaderError(where, null, `not valid JSON (${(e as Error).message})`);
  }
  if (!config || typeof config !== "object" || Array.isArray(config)) {
    throw new LoaderError(where, null, "not an object");
  }
  // mlx-lm also takes a wrapper's quantization_config from its text_config.
  const found: [string, unknown][] = [
    ["quantization", config.quantization],
    ["quantization_config", config.quantization_config],
    ["text_config.quantization_config", textConfig(config)?.quantization_config],
  ];
  for (const [field, q] of found) {
    if (q != null) {
      throw new LoaderError(
        where,
        field,
        `input is already quantized (${JSON.stringify(q)}); give an unquantized one`,
      );
    }
  }
  return config;
}

/**
 * The model's tensors: the index's shards, else every `model*.safetensors` (as mlx-lm globs; skips goldens
 * etc.).
 */
async function readInputTensors(source: DiskModelSource, files: string[]): Promise<Map<string, TensorEntry>> {
  if (files.includes("model.safetensors.index.json")) return (await readTensorIndex(source)).tensors;
  const shards = files.filter((f) => f.startsWith("model") && f.endsWith(".safetensors"));
  const none = "no model*.safetensors file and no model.safetensors.index.json in the input folder";
  if (shards.length === 0) throw new LoaderError(source.name, "model.safetensors", none);
  const all = new Map<string, TensorEntry>();
  for (const f of shards) for (const [k, v] of (await readHeader(source, f)).tensors) all.set(k, v);
  return all;
}

async function prepareOut(hf: string, out: string, force: boolean): Promise<void> {
  const entries = await Array.fromAsync(Deno.readDir(out), (e) => e.name).catch((e: Error) => {
    if (e instanceof Deno.errors.NotFound) return null;
    throw new LoaderError(out, null, `not a folder (${e.message})`);
  });
  if (entries === null) return await Deno.mkdir(out, { recursive: true });
  if (await Deno.realPath(out) === await Deno.realPath(hf)) {
    throw new LoaderError(out, null, "is the input folder");
  }
  const n = entries.length;
  if (n && !force) throw new LoaderError(out, null, `output folder is not empty (${n} entries); add --force`);
  // A stale index or shard from an earlier run would be read instead of (or with) the new files.
  const stale = entries.filter((f) => /^model.*\.safetensors$|^model\.safetensors\.index\.json$/.test(f));
  for (const f of stale) await Deno.remove(`${out}/${f}`);
}

/** mlx-lm's `make_shards`: fill a file until the next tensor would pass the limit (data bytes only). */
function splitShards(plan: Planned[], max: number): Planned[][] {
  const shards: Planned[][] = [[]];
  let size = 0;
  for (const t of plan) {
    if (size + t.byteLength > max && shards[shards.length - 1].length) {
      shards.push([]);
      size = 0;
    }
    shards[shards.length - 1].push(t);
    size += t.byteLength;
  }
  return shards;
}

/** Same bytes as `encodeSafetensors`' header (JSON padded with spaces to 8), without needing the data. */
function safetensorsHeader(tensors: Planned[], metadata: Record<string, string>): Uint8Array {
  const header: Record<string, unknown> = { __metadata__: metadata };
  let off = 0;
  for (const t of tensors) {
    header[t.name] = { dtype: t.dtype, shape: t.shape, data_offsets: [off, off + t.byteLength] };
    off += t.byteLength;
  }
  const text = JSON.stringify(header);
  const pad = (8 - (new TextEncoder().encode(text).byteLength % 8)) % 8;
  const json = new TextEncoder().encode(text + " ".repeat(pad));
  const out = new Uint8Array(8 + json.byteLength);
  new DataView(out.buffer).setBigUint64(0, BigInt(json.byteLength), true);
  out.set(json, 8);
  return out;
}

async function copyTensor(source: DiskModelSource, t: TensorEntry, file: Deno.FsFile): Promise<void> {
  for (let off = 0; off < t.byteLength; off += CHUNK_BYTES) {
    await writeAll(
      file,
      await source.read(t.file, t.offset + off, Math.min(CHUNK_BYTES, t.byteLength - off)),
    );
  }
}

/** Rows per read: one chunk's worth. */
const chunkRows = (job: Exclude<Job, { kind: "copy" }>) =>
  Math.max(1, Math.floor(CHUNK_BYTES / (job.cols * DTYPE_BYTES[job.from.src.dtype])));

/** A float job's weight (an expert stack cut from a fused one), rows in order, in its own dtype. */
async function restack(source: DiskModelSource, job: Extract<Job, { kind: "float" }>): Promise<Uint8Array> {
  const rows = jobRows(job);
  const out = new Uint8Array(rows * job.cols * DTYPE_BYTES[job.dtype]);
  for (let r0 = 0; r0 < rows; r0 += chunkRows(job)) {
    const w = await readRows(source, job.from, job.cols, r0, Math.min(chunkRows(job), rows - r0));
    out.set(encodeFloats(w, job.dtype), r0 * job.cols * DTYPE_BYTES[job.dtype]);
  }
  return out;
}

/** Reads one weight in row chunks and returns its three outputs' bytes by name. */
async function quantizeTensor(
  source: DiskModelSource,
  job: Extract<Job, { kind: "quant" }>,
  bits: number,
  groupSize: number,
  quantizer: Quantizer,
): Promise<Map<string, Uint8Array>> {
  const { from, cols, dtype } = job;
  const rows = jobRows(job);
  const gpr = cols / groupSize;
  const weight = new Uint8Array((rows * cols * bits) / 8);
  const scales = new Uint8Array(rows * gpr * DTYPE_BYTES[dtype]);
  const biases = new Uint8Array(scales.byteLength);
  for (let r0 = 0; r0 < rows; r0 += chunkRows(job)) {
    const n = Math.min(chunkRows(job), rows - r0);
    const w = await readRows(source, from, cols, r0, n);
    // mlx-lm casts the weights to the config dtype before quantizing them.
    const cast = dtype === from.src.dtype ? w : toFloat32(encodeFloats(w, dtype), dtype);
    const res = quantizer(cast, n, cols, bits, groupSize, dtype);
    weight.set(
      new Uint8Array(res.weight.buffer, res.weight.byteOffset, res.weight.byteLength),
      (r0 * cols * bits) / 8,
    );
    scales.set(encodeFloats(res.scales, dtype), r0 * gpr * DTYPE_BYTES[dtype]);
    biases.set(encodeFloats(res.biases, dtype), r0 * gpr * DTYPE_BYTES[dtype]);
  }
  return new Map([[`${job.prefix}.weight`, weight], [`${job.prefix}.scales`, scales], [
    `${job.prefix}.biases`,
    biases,
  ]]);
}

/** Little-endian bytes of `v` in `dtype`, rounding to nearest even as MLX's static_cast to bf16/f16 does. */
function encodeFloats(v: Float32Array, dtype: FloatDType): Uint8Array {
  if (dtype === "F32") return new Uint8Array(v.slice().buffer);
  const h = new Uint16Array(v.length);
  for (let i = 0; i < v.length; i++) h[i] = dtype === "BF16" ? f32ToBf16(v[i]) : f32ToF16(v[i]);
  return new Uint8Array(h.buffer);
}

async function writeAll(file: Deno.FsFile, bytes: Uint8Array): Promise<void> {
  for (let done = 0; done < bytes.byteLength;) done += await file.write(bytes.subarray(done));
}

const pad5 = (n: number) => String(n).padStart(5, "0");
const mb = (n: number) => `${(n / 1e6).toFixed(1)} MB`;
