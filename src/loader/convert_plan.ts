/**
 * What `convert` writes, planned from the input headers alone: each output tensor's name, dtype, shape and
 * the job that makes its bytes. Follows mlx-lm's `sanitize` + `nn.quantize` for the models Flint runs: a tied
 * head, `rotary_emb.inv_freq` and MTP heads are dropped; HF fused expert stacks become `switch_mlp` stacks;
 * a multimodal wrapper's text weights take mlx-lm's `language_model.*` names and its vision tower is dropped.
 * @module
 */
import { LoaderError } from "../errors.ts";
import type { ModelSource } from "../platform/mod.ts";
import { isVisionTensor, mlxWrappedName, textConfig } from "./nested.ts";
import { type DType, DTYPE_BYTES, type TensorEntry, toFloat32 } from "./safetensors.ts";

/** Float dtypes scales/biases can be stored in. */
export type FloatDType = "BF16" | "F16" | "F32";

/**
 * Where a [rows, cols] weight's rows come from: row ranges of `src` (leading dims flattened, taken in
 * order), or, for a transposed fused stack ([E, cols, W]), columns [off, off + n) of every expert's matrix.
 */
export type RowSource =
  | { kind: "rows"; src: TensorEntry; ranges: [number, number][] }
  | { kind: "cols"; src: TensorEntry; off: number; n: number };

/**
 * copy: `src` byte for byte; quant: `from` quantized into `prefix`.weight/.scales/.biases; float: `from`
 * re-stacked in its own dtype (a fused expert stack whose rows do not divide into groups).
 */
export type Job =
  | { kind: "copy"; src: TensorEntry }
  | { kind: "quant"; from: RowSource; prefix: string; lead: number[]; cols: number; dtype: FloatDType }
  | { kind: "float"; from: RowSource; lead: number[]; cols: number; dtype: FloatDType };
export type Planned = { name: string; dtype: DType; shape: number[]; byteLength: number; job: Job };

export interface TensorPlan {
  plan: Planned[];
  /** Input tensors not written, with the vision tower's and MTP heads' among them. */
  dropped: string[];
  vision: number;
  /** 2-D weights (and expert stacks) left in float: last dim not a multiple of the group size. */
  skipped: number;
}

const FLOATS = ["BF16", "F16", "F32"];
const GATE_UP = ".experts.gate_up_proj";
const DOWN = ".experts.down_proj";

/** The job's input tensor. */
export const jobSource = (j: Job): TensorEntry => (j.kind === "copy" ? j.src : j.from.src);
/** Rows of a quant or float job's weight. */
export const jobRows = (j: Exclude<Job, { kind: "copy" }>): number => j.lead.reduce((a, b) => a * b, 1);

function planned(name: string, dtype: DType, shape: number[], job: Job): Planned {
  return { name, dtype, shape, job, byteLength: shape.reduce((a, d) => a * d, 1) * DTYPE_BYTES[dtype] };
}

/**
 * MoE routers (`mlp.gate`, the shared expert's `shared_expert_gate`) stay in float, as mlx-lm leaves them:
 * a few experts' worth of logits decide every token's route.
 */
function isRouter(name: string): boolean {
  return name.endsWith(".mlp.gate.weight") || name.endsWith(".shared_expert_gate.weight");
}

/**
 * Which tensors become `P.weight/.scales/.biases`: what mlx-lm's `nn.quantize` predicate takes (Linear and
 * Embedding weights, and expert stacks, whose input dim divides into groups), seen from HF names as 2-D float
 * `*.weight` and fused `experts.*_proj` stacks.
 */
export function planTensors(
  input: Map<string, TensorEntry>,
  config: Record<string, any>,
  o: { bits: number; groupSize: number; dtype: FloatDType | undefined; hf: string },
): TensorPlan {
  const plan: Planned[] = [];
  const dropped: string[] = [];
  const text = textConfig(config);
  const wrapped = !!text || [...input.keys()].some((n) => /^(model\.)?language_model\./.test(n));
  // Output name → input tensor (mlx-lm's sanitize: the wrapper's names, then the text model's drops).
  const tensors = new Map<string, TensorEntry>();
  let vision = 0;
  for (const name of [...input.keys()].sort()) {
    const out = wrapped ? mlxWrappedName(name) : name;
    if (wrapped && isVisionTensor(name)) vision++;
    const drop = (wrapped && isVisionTensor(name)) || name.endsWith(".rotary_emb.inv_freq") ||
      /^(language_model\.)?mtp\./.test(out);
    if (drop) dropped.push(name);
    else tensors.set(out, input.get(name)!);
  }
  // A tied head is the embedding.
  const root = wrapped ? "language_model." : "";
  const head = `${root}lm_head.weight`;
  const tied = (text?.tie_word_embeddings ?? config.tie_word_embeddings) === true;
  if (tied && tensors.has(head) && tensors.has(`${root}model.embed_tokens.weight`)) {
    dropped.push(tensors.get(head)!.name);
    tensors.delete(head);
  }

  let skipped = 0;
  /** Quantizes `from` into `prefix`.*, or, when its rows do not divide into groups, writes `fallback`. */
  const quantize = (prefix: string, from: RowSource, lead: number[], cols: number, fallback: Planned) => {
    if (cols % o.groupSize !== 0) {
      skipped++; // mlx-lm skips these silently
      plan.push(fallback);
      return;
    }
    // mlx-lm casts every float parameter to config's torch_dtype before quantizing, so the scales/biases
    // take that dtype; without one the weight keeps its own (F32 stays F32: mlx-lm does not pick bf16).
    const dtype = o.dtype ?? (from.src.dtype as FloatDType);
    const job: Job = { kind: "quant", from, prefix, lead, cols, dtype };
    plan.push(
      planned(`${prefix}.biases`, dtype, [...lead, cols / o.groupSize], job),
      planned(`${prefix}.scales`, dtype, [...lead, cols / o.groupSize], job),
      planned(`${prefix}.weight`, "U32", [...lead, (cols * o.bits) / 32], job),
    );
  };

  for (const [name, t] of tensors) {
    // A fused pair is planned once, at its gate_up_proj (down_proj sorts first).
    if (name.endsWith(DOWN) && tensors.has(`${name.slice(0, -DOWN.length)}${GATE_UP}`)) continue;
    if (name.endsWith(GATE_UP) || name.endsWith(DOWN)) {
      const moe = name.slice(0, -(name.endsWith(GATE_UP) ? GATE_UP : DOWN).length);
      for (const { prefix, from, lead, cols } of fusedExperts(moe, tensors, o.hf)) {
        const dtype = t.dtype as FloatDType;
        const restacked: Job = { kind: "float", from, lead, cols, dtype };
        quantize(prefix, from, lead, cols, planned(`${prefix}.weight`, dtype, [...lead, cols], restacked));
      }
      continue;
    }
    // Copied byte for byte, dtype included: norms and real biases are small, and mlx-lm's per-model
    // cast_predicate (which keeps some of them float32) is not knowable from the checkpoint alone.
    const copy = planned(name, t.dtype, t.shape, { kind: "copy", src: t });
    const linear = FLOATS.includes(t.dtype) && name.endsWith(".weight") && t.shape.length === 2;
    if (!linear || isRouter(name)) {
      plan.push(copy);
      continue;
    }
    const [rows, cols] = t.shape;
    quantize(
      name.slice(0, -".weight".length),
      { kind: "rows", src: t, ranges: [[0, rows]] },
      [rows],
      cols,
      copy,
    );
  }
  plan.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const dup = plan.find((t, i) => i > 0 && plan[i - 1].name === t.name);
  if (dup) {
    throw new LoaderError(
      o.hf,
      dup.name,
      "input has a tensor of this name already, which convert would write",
    );
  }
  return { plan, dropped, vision, skipped };
}

/**
 * An HF fused MoE stack (`experts.gate_up_proj` [E, 2I, H] with `experts.down_proj` [E, H, I], or both
 * transposed: [E, H, 2I] and [E, I, H]) as mlx-lm's sanitize splits it: `switch_mlp.gate_proj`, `up_proj`
 * [E, I, H] (gate first) and `down_proj` [E, H, I]. The pair's shapes tell the two layouts apart.
 */
function fusedExperts(
  moe: string,
  tensors: Map<string, TensorEntry>,
  hf: string,
): { prefix: string; from: RowSource; lead: number[]; cols: number }[] {
  const gu = tensors.get(`${moe}${GATE_UP}`);
  const dn = tensors.get(`${moe}${DOWN}`);
  const [g, d] = [gu?.shape ?? [], dn?.shape ?? []];
  const ok = gu && dn && g.length === 3 && d.length === 3 && g[0] === d[0] && FLOATS.includes(gu.dtype) &&
    gu.dtype === dn.dtype;
  const [E, a, b] = g;
  const plain = ok && a === 2 * d[2] && b === d[1];
  const transposed = ok && b === 2 * d[1] && a === d[2];
  if (!plain && !transposed) {
    throw new LoaderError(
      hf,
      `${moe}.experts`,
      `fused expert stacks gate_up_proj ${gu ? `${gu.dtype} [${g}]` : "(missing)"} and down_proj ` +
        `${
          dn ? `${dn.dtype} [${d}]` : "(missing)"
        }: expected float [E, 2I, H] and [E, H, I] (or both transposed)`,
    );
  }
  const sw = `${moe}.switch_mlp`;
  if (plain) {
    const [I, H] = [a / 2, b];
    const halves = (off: number): RowSource => ({
      kind: "rows",
      src: gu,
      ranges: Array.from({ length: E }, (_, e) => [e * 2 * I + off, I] as [number, number]),
    });
    return [
      { prefix: `${sw}.gate_proj`, from: halves(0), lead: [E, I], cols: H },
      { prefix: `${sw}.up_proj`, from: halves(I), lead: [E, I], cols: H },
      {
        prefix: `${sw}.down_proj`,
        from: { kind: "rows", src: dn, ranges: [[0, E * H]] },
        lead: [E, H],
        cols: I,
      },
    ];
  }
  const [H, I] = [a, b / 2];
  return [
    { prefix: `${sw}.gate_proj`, from: { kind: "cols", src: gu, off: 0, n: I }, lead: [E, I], cols: H },
    { prefix: `${sw}.up_proj`, from: { kind: "cols", src: gu, off: I, n: I }, lead: [E, I], cols: H },
    { prefix: `${sw}.down_proj`, from: { kind: "cols", src: dn, off: 0, n: H }, lead: [E, H], cols: I },
  ];
}

/** Rows [r0, r0 + n) of a weight whose rows are `cols` long, as float32. */
export async function readRows(
  source: ModelSource,
  from: RowSource,
  cols: number,
  r0: number,
  n: number,
): Promise<Float32Array> {
  const t = from.src;
  const el = DTYPE_BYTES[t.dtype];
  const out = new Float32Array(n * cols);
  if (from.kind === "rows") {
    let base = 0;
    for (const [first, count] of from.ranges) {
      const [lo, hi] = [Math.max(r0, base), Math.min(r0 + n, base + count)];
      if (lo < hi) {
        const at = t.offset + (first + lo - base) * cols * el;
        out.set(toFloat32(await source.read(t.file, at, (hi - lo) * cols * el), t.dtype), (lo - r0) * cols);
      }
      base += count;
    }
    return out;
  }
  // Row r is column off + r mod n of expert ⌊r / n⌋'s [cols, W] matrix.
  const W = t.shape[2];
  for (let r = r0; r < r0 + n;) {
    const e = Math.floor(r / from.n);
    const m = toFloat32(await source.read(t.file, t.offset + e * cols * W * el, cols * W * el), t.dtype);
    for (const end = Math.min(r0 + n, (e + 1) * from.n); r < end; r++) {
      const j = from.off + (r % from.n);
      for (let k = 0; k < cols; k++) out[(r - r0) * cols + k] = m[k * W + j];
    }
  }
  return out;
}
