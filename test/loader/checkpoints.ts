/**
 * Checkpoint variants built in temp dirs from the fixtures, for the fused-expert and multimodal-wrapper tests
 * (test/models/convert_fused_test.ts, test/loader/wrapped_test.ts): the same weights, laid out as newer
 * transformers (fused expert stacks) or as the released Qwen3.5 / 3.6 checkpoints (a `text_config` wrapper
 * with a vision tower beside the text weights) write them.
 * @module
 */
import {
  type DType,
  encodeSafetensors,
  f32ToBf16,
  readHeader,
  readTensorBytes,
} from "../../src/loader/safetensors.ts";
import { DiskModelSource } from "../../src/platform/deno.ts";

export type Tensor = { name: string; dtype: DType; shape: number[]; data: Uint8Array };

/** A model folder's model.safetensors, tensors in name order. */
export async function readTensors(dir: string, file = "model.safetensors"): Promise<Tensor[]> {
  const src = new DiskModelSource(dir);
  try {
    const { tensors } = await readHeader(src, file);
    const out: Tensor[] = [];
    for (const t of [...tensors.values()].sort((a, b) => (a.name < b.name ? -1 : 1))) {
      out.push({
        name: t.name,
        dtype: t.dtype,
        shape: t.shape,
        data: (await readTensorBytes(src, t)).slice(),
      });
    }
    return out;
  } finally {
    src.close();
  }
}

/** Writes a model folder: model.safetensors, config.json and generation_config.json (copied from `from`). */
export async function writeModel(
  dir: string,
  tensors: Tensor[],
  config: unknown,
  from: string,
): Promise<void> {
  const parts = encodeSafetensors(tensors);
  const bytes = new Uint8Array(parts.reduce((a, p) => a + p.byteLength, 0));
  let off = 0;
  for (const p of parts) bytes.set(p, (off += p.byteLength) - p.byteLength);
  await Deno.writeFile(`${dir}/model.safetensors`, bytes);
  await Deno.writeTextFile(`${dir}/config.json`, JSON.stringify(config, null, 2));
  await Deno.copyFile(`${from}/generation_config.json`, `${dir}/generation_config.json`);
}

export async function readConfig(dir: string): Promise<Record<string, any>> {
  return JSON.parse(await Deno.readTextFile(`${dir}/config.json`));
}

/** 16-bit elements of a [rows, cols] matrix, transposed to [cols, rows]. */
function transpose16(data: Uint8Array, rows: number, cols: number): Uint8Array {
  const a = new Uint16Array(data.slice().buffer);
  const t = new Uint16Array(a.length);
  for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) t[c * rows + r] = a[r * cols + c];
  return new Uint8Array(t.buffer);
}

export function cat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((a, p) => a + p.byteLength, 0));
  parts.reduce((off, p) => (out.set(p, off), off + p.byteLength), 0);
  return out;
}

/**
 * HF per-expert tensors (`P.experts.E.{gate,up,down}_proj.weight`, 16-bit) fused as transformers 5 writes
 * them: `P.experts.gate_up_proj` [E, 2I, H] (each expert's gate rows, then its up rows) and
 * `P.experts.down_proj` [E, H, I]; `transposed`: [E, H, 2I] (gate columns, then up) and [E, I, H].
 */
export function fuseExperts(tensors: Tensor[], transposed = false): Tensor[] {
  const by = new Map(tensors.map((t) => [t.name, t]));
  const out = tensors.filter((t) => !/\.experts\.\d+\./.test(t.name));
  const prefixes = new Set(
    tensors.flatMap((t) => /^(.*)\.experts\.0\.gate_proj\.weight$/.exec(t.name)?.[1] ?? []),
  );
  for (const p of prefixes) {
    const get = (e: number, n: string) => by.get(`${p}.experts.${e}.${n}.weight`);
    let E = 0;
    while (get(E, "gate_proj")) E++;
    const [I, H] = get(0, "gate_proj")!.shape;
    const dtype = get(0, "gate_proj")!.dtype;
    const gateUp: Uint8Array[] = [];
    const down: Uint8Array[] = [];
    for (let e = 0; e < E; e++) {
      const [g, u, d] = ["gate_proj", "up_proj", "down_proj"].map((n) => get(e, n)!.data);
      if (!transposed) gateUp.push(g, u), down.push(d);
      else {
        // Row h of expert e's [H, 2I] matrix: gate column h, then up column h.
        const [gt, ut] = [transpose16(g, I, H), transpose16(u, I, H)];
        for (let h = 0; h < H; h++) {
          gateUp.push(gt.subarray(h * I * 2, (h + 1) * I * 2), ut.subarray(h * I * 2, (h + 1) * I * 2));
        }
        down.push(transpose16(d, H, I));
      }
    }
    out.push(
      {
        name: `${p}.experts.gate_up_proj`,
        dtype,
        shape: transposed ? [E, H, 2 * I] : [E, 2 * I, H],
        data: cat(gateUp),
      },
      { name: `${p}.experts.down_proj`, dtype, shape: transposed ? [E, I, H] : [E, H, I], data: cat(down) },
    );
  }
  return out.sort((a, b) => (a.name < b.name ? -1 : 1));
}

/** A small non-zero bf16 tensor standing in for a vision tower weight. */
export function visionTensor(name: string, shape: number[]): Tensor {
  const n = shape.reduce((a, b) => a * b, 1);
  const h = new Uint16Array(n);
  for (let i = 0; i < n; i++) h[i] = f32ToBf16(Math.sin(i + 1) / 4);
  return { name, dtype: "BF16", shape, data: new Uint8Array(h.buffer) };
}

/**
 * A text model's checkpoint wrapped as the released Qwen3.5 / 3.6 ones: config.json with the text config
 * under `text_config` and model_type `outer`; tensors renamed HF-style (`model.X` → `model.language_model.X`,
 * `lm_head` kept) or MLX-style (`language_model.` before every name), plus vision tensors.
 */
export function wrap(
  tensors: Tensor[],
  config: Record<string, any>,
  o: { outer: string; mlx: boolean },
): { tensors: Tensor[]; config: Record<string, any> } {
  const rename = (n: string) =>
    o.mlx ? `language_model.${n}` : n.startsWith("model.") ? `model.language_model.${n.slice(6)}` : n;
  const vision = o.mlx
    ? [
      visionTensor("vision_tower.blocks.0.attn.qkv.weight", [96, 32]),
      visionTensor("vision_tower.norm.weight", [32]),
    ]
    : [
      visionTensor("model.visual.blocks.0.attn.qkv.weight", [96, 32]),
      visionTensor("model.visual.norm.weight", [32]),
    ];
  const { quantization, quantization_config, ...text } = config;
  const arch = o.outer === "qwen3_5"
    ? "Qwen3_5ForConditionalGeneration"
    : "Qwen3_5MoeForConditionalGeneration";
  return {
    tensors: [...tensors.map((t) => ({ ...t, name: rename(t.name) })), ...vision],
    config: {
      architectures: [arch],
      model_type: o.outer,
      text_config: text,
      vision_config: { model_type: o.outer, depth: 1, hidden_size: 32, num_heads: 2, out_hidden_size: 64 },
      tie_word_embeddings: config.tie_word_embeddings,
      ...(quantization ? { quantization, quantization_config } : {}),
    },
  };
}
